# -*- coding: utf-8 -*-
# Copyright: cco maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function
__metaclass__ = type


class ModuleDocFragment(object):
    # The options every module of the collection takes: which cco-install
    # runs, and on which system.
    DOCUMENTATION = r'''
options:
  binary:
    description: The cco-install to run, a name on PATH or a path.
    type: str
    default: cco-install
  root:
    description: Work on the system under this directory instead of C(/) (C(--root)).
    type: path
    default: /
author:
  - cco maintainers
'''
