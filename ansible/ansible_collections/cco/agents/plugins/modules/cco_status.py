#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: cco maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: cco_status
short_description: Report whether a machine is as cco-install left it
description:
  - Runs C(cco-install status --json) and returns its document. It never
    changes anything, in check mode or not.
  - Drift (an owned file missing or edited, a vendor binary ahead of the
    shadow on PATH) fails the task only with O(fail_on_drift=true), so a
    fleet report can gather every host's status.
version_added: "0.1.0"
extends_documentation_fragment:
  - cco.agents.cco
options:
  verify:
    description: Re-hash every owned file instead of trusting size, mtime and inode (C(--verify)).
    type: bool
    default: false
  fail_on_drift:
    description: Fail the task when the machine is not in sync.
    type: bool
    default: false
notes:
  - Supports check mode.
'''

EXAMPLES = r'''
- name: Gather cco's status
  cco.agents.cco_status:
  register: cco

- name: Fail where cco drifted
  cco.agents.cco_status:
    verify: true
    fail_on_drift: true
'''

RETURN = r'''
status:
  description: cco-install status's JSON document (in_sync, drift, failed, paths, findings); empty where cco-install is not installed.
  returned: always
  type: dict
in_sync:
  description: Whether every owned path is as cco-install left it and nothing else drifted.
  returned: always
  type: bool
cco_jail_verified:
  description: Whether the last C(cco-install verify) kept on the host held and nothing it was taken on (shadow, agents, kernel, sandbox.toml) changed since.
  returned: always
  type: bool
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.cco.agents.plugins.module_utils.cco import (
    EXIT_CONFLICT, EXIT_OK, common_args, find_binary, run_json)


def drift_lines(status):
    lines = []
    for p in status.get('paths') or []:
        if p.get('status') != 'ok':
            lines.append('%s (step %s): %s' % (p.get('path'), p.get('step'), p.get('detail')))
    for f in status.get('findings') or []:
        line = '%s: %s' % (f.get('id'), f.get('detail'))
        if f.get('fix'):
            line += '; ' + f['fix']
        lines.append(line)
    return lines


def main():
    module = AnsibleModule(
        argument_spec=common_args(
            verify=dict(type='bool', default=False),
            fail_on_drift=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    path = find_binary(module, p['binary'])
    if path is None:
        # Not installed is not in sync; a fleet report still gathers it.
        result = dict(changed=False, in_sync=False, status={}, cmd=[], cco_jail_verified=False,
                      msg='%s is not installed (or not on PATH): install the cco package, or set binary to its path' % p['binary'])
        if p['fail_on_drift']:
            module.fail_json(**result)
        module.exit_json(**result)
    argv = [path, 'status', '--json']
    if p['root'] and p['root'] != '/':
        argv += ['--root', p['root']]
    if p['verify']:
        argv.append('--verify')
    rc, status, err = run_json(module, argv)
    if rc not in (EXIT_OK, EXIT_CONFLICT):
        module.fail_json(msg='cco-install status failed (exit %d): %s' % (rc, '; '.join(drift_lines(status)) or err.strip()),
                         status=status, in_sync=False, cmd=argv, rc=rc)
    in_sync = bool(status.get('in_sync'))
    # No rc in the result: Ansible takes a non-zero rc for a failure, and
    # drift (exit 3) is a finding here, not a failure.
    jv = status.get('jail_verified') or {}
    result = dict(changed=False, status=status, in_sync=in_sync, cmd=argv,
                  cco_jail_verified=bool(jv.get('ok')) and not jv.get('changed'))
    if not in_sync and p['fail_on_drift']:
        result['msg'] = 'cco drifted: ' + '; '.join(drift_lines(status))
        module.fail_json(rc=rc, **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
