# -*- coding: utf-8 -*-
# Copyright: cco maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Runs cco-install with --json and reads its one JSON document."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os

# cco-install's exit codes (README, "Exit codes").
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CONFLICT = 3

# The options of every module (doc fragment cco.agents.cco).
COMMON_ARGS = dict(
    binary=dict(type='str', default='cco-install'),
    root=dict(type='path', default='/'),
)


def common_args(**more):
    """COMMON_ARGS plus a module's own options."""
    spec = dict(COMMON_ARGS)
    spec.update(more)
    return spec


def find_binary(module, binary):
    """The path of cco-install, or None when it is not installed."""
    if '/' in binary:
        return binary if os.path.exists(binary) else None
    return module.get_bin_path(binary)


def run_json(module, argv):
    """Runs argv (a list: no shell) and returns (rc, document, stderr).
    A missing or broken document fails the task with cco-install's stderr."""
    rc, out, err = module.run_command(argv, check_rc=False)
    try:
        doc = json.loads(out)
    except ValueError:
        module.fail_json(
            msg='%s exited %d without a JSON report: %s' % (' '.join(argv), rc, (err or out).strip()),
            rc=rc, stdout=out, stderr=err, cmd=argv)
    if not isinstance(doc, dict):
        module.fail_json(msg='%s printed %r, not a report' % (' '.join(argv), doc), rc=rc, cmd=argv)
    return rc, doc, err


def step_problems(report):
    """One line per conflicted or failed step: its id, what it found (the
    detail carries the fix) and its paths."""
    lines = []
    for step in report.get('steps') or []:
        if step.get('status') not in ('conflict', 'failed'):
            continue
        line = 'step %s %s: %s' % (step.get('id'), step.get('status'), step.get('detail'))
        paths = step.get('paths') or []
        if paths:
            line += ' (paths: %s)' % ', '.join(paths)
        lines.append(line)
    return lines
