#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: cco maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: cco_install
short_description: Provision a machine with cco-install
description:
  - Runs C(cco-install --json --yes) and reports its verdict. C(changed) is
    cco-install's own count of changed steps, so a second run is ok exactly
    when cco-install changed nothing.
  - In check mode it runs C(cco-install --dry-run --json), and with C(--diff)
    it adds C(--diff), so C(--check --diff) shows the real plan, drift
    included. On a host where cco-install is not installed yet (the package
    install before it is only simulated in check mode) it reports changed.
  - A conflict (exit 3) or a failure ends the task with a C(msg) naming each
    step, what it found, the fix and the paths.
version_added: "0.1.0"
extends_documentation_fragment:
  - cco.agents.cco
options:
  verify_jail:
    description:
      - After a successful run (not in check mode), run C(cco-install verify --json), a self-test battery in each
        installed agent's real jail, and return its verdict as C(cco_jail_verified) and C(cco_jail_failed).
    type: bool
    default: true
  require_verified:
    description:
      - Fail the task when a check of C(cco-install verify) fails, naming each check and its fix.
    type: bool
    default: false
  state:
    description:
      - C(present) installs and repairs, C(absent) undoes what the receipt
        records (C(--uninstall)).
    type: str
    choices: [present, absent]
    default: present
  agents:
    description:
      - The agents whose vendor steps run (C(--agents)); an empty list runs
        none. Unset, install.toml's C(agents) key applies.
      - Agent names such as C(claude), C(codex), C(gemini), C(opencode), C(droid), C(pi) or C(copilot); cco-install
        checks them, and an unknown one fails the task with its message.
    type: list
    elements: str
  upgrade:
    description:
      - Upgrade an agent (such as C(claude), C(codex), C(gemini) or C(opencode)) or C(all)
        to the newest release of the configured channel (C(--upgrade)).
      - cco-install checks the name; an unknown one fails the task with its
        message.
    type: str
  rollback:
    description:
      - Switch an agent (such as C(claude), C(codex), C(gemini) or C(opencode)) or C(all)
        back to the previous installed version (C(--rollback)).
      - cco-install checks the name; an unknown one fails the task with its
        message.
    type: str
  bundle:
    description: An offline bundle to install the vendors from (C(--bundle)).
    type: path
  force:
    description: Replace owned files that were edited, keeping backups (C(--force)). Foreign files are never replaced.
    type: bool
    default: false
notes:
  - Supports check mode and diff mode.
  - Fleet settings belong in C(/etc/cco/install.toml) (the role
    C(cco.agents.install) templates it), so a later C(cco-install --upgrade)
    on the host uses them too.
'''

EXAMPLES = r'''
- name: Provision cco
  cco.agents.cco_install:

- name: Provision without the vendors' downloads
  cco.agents.cco_install:
    agents: []

- name: Upgrade every agent the agents key names
  cco.agents.cco_install:
    upgrade: all

- name: Undo the installation
  cco.agents.cco_install:
    state: absent
'''

RETURN = r'''
report:
  description: cco-install's JSON report (schema, version, changed, conflicts, failed, steps).
  returned: when cco-install ran
  type: dict
  sample: {"schema": 1, "changed": 0, "conflicts": 0, "failed": 0, "steps": []}
cmd:
  description: The command line that ran.
  returned: always
  type: list
  elements: str
cco_jail_verified:
  description: Whether every check of C(cco-install verify) held on this host.
  returned: when verify_jail ran (state present, not in check mode, no root)
  type: bool
cco_jail_failed:
  description: The failed checks, C(<agent>:<check id>), or the reason the battery could not run.
  returned: when verify_jail ran
  type: list
  elements: str
jail:
  description: C(cco-install verify --json)'s document (schema, ok, time, kernel, engine, layers, versions, checks, failed).
  returned: when verify_jail ran
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.cco.agents.plugins.module_utils.cco import (
    EXIT_CONFLICT, EXIT_OK, common_args, find_binary, run_json, step_problems)


def build_argv(path, params, check, diff):
    argv = [path, '--json', '--yes']
    if params['root'] and params['root'] != '/':
        argv += ['--root', params['root']]
    if check:
        argv.append('--dry-run')
    if params['state'] == 'absent':
        argv.append('--uninstall')
    elif diff:
        argv.append('--diff')
    if params['state'] == 'present':
        if params['agents'] is not None:
            argv.append('--agents=' + ','.join(params['agents']))
        if params['upgrade']:
            argv += ['--upgrade', params['upgrade']]
        if params['rollback']:
            argv += ['--rollback', params['rollback']]
        if params['bundle']:
            argv += ['--bundle', params['bundle']]
    if params['force']:
        argv.append('--force')
    return argv


def verify_jail(module, path, params, result):
    """Runs cco-install verify --json and adds its verdict to result; with
    require_verified, a failed check fails the task."""
    argv = [path, 'verify', '--json']
    if params['root'] and params['root'] != '/':
        argv += ['--root', params['root']]
    rc, doc, err = run_json(module, argv)
    failed = list(doc.get('failed') or [])
    verified = rc == EXIT_OK and bool(doc.get('ok'))
    if rc not in (EXIT_OK, EXIT_CONFLICT):
        failed = ['battery: ' + (doc.get('error') or err or 'exit %d' % rc).strip()]
    result.update(cco_jail_verified=verified, cco_jail_failed=failed, jail=doc)
    if not verified and params['require_verified']:
        lines = []
        for c in doc.get('checks') or []:
            if not c.get('ok'):
                line = '%s %s: %s' % (c.get('agent'), c.get('id'), c.get('detail'))
                if c.get('fix'):
                    line += '; fix: ' + c['fix']
                lines.append(line)
        result['msg'] = 'the jail is not verified on this host (require_verified): ' + '; '.join(lines or failed)
        module.fail_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=common_args(
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            agents=dict(type='list', elements='str'),
            # The agent names are cco-install's to check: a list here
            # would go stale with the next agent.
            upgrade=dict(type='str'),
            rollback=dict(type='str'),
            bundle=dict(type='path'),
            force=dict(type='bool', default=False),
            verify_jail=dict(type='bool', default=True),
            require_verified=dict(type='bool', default=False),
        ),
        mutually_exclusive=[('upgrade', 'rollback')],
        supports_check_mode=True,
    )
    p = module.params
    path = find_binary(module, p['binary'])
    if path is None:
        if module.check_mode and p['state'] == 'present':
            # A fresh host in check mode: the package task before this one
            # only said it would install cco-install.
            module.exit_json(changed=True, cmd=[],
                             msg='%s is not installed yet: every step would run once it is' % p['binary'])
        if p['state'] == 'absent':
            module.exit_json(changed=False, cmd=[], msg='%s is not installed: nothing to undo' % p['binary'])
        module.fail_json(msg='%s is not installed (or not on PATH): install the cco package first, or set binary to its path' % p['binary'], cmd=[])

    argv = build_argv(path, p, module.check_mode, module._diff)
    rc, report, err = run_json(module, argv)
    result = dict(changed=(report.get('changed') or 0) > 0, report=report, cmd=argv, rc=rc)
    if module._diff:
        diffs = [s['diff'] for s in report.get('steps') or [] if s.get('diff')]
        if diffs:
            result['diff'] = dict(prepared='\n'.join(diffs))
    if rc == EXIT_OK:
        if p['state'] == 'present' and p['verify_jail'] and not module.check_mode and (not p['root'] or p['root'] == '/'):
            verify_jail(module, path, p, result)
        module.exit_json(**result)
    problems = step_problems(report)
    what = 'conflicts' if rc == EXIT_CONFLICT else 'failed'
    if not problems:
        # A run refused before any step (an unknown agent, a bad key) says
        # why in the report's error.
        problems = [(report.get('error') or err or 'exit %d' % rc).strip()]
    result['msg'] = 'cco-install %s (exit %d): %s' % (what, rc, '; '.join(problems))
    module.fail_json(**result)


if __name__ == '__main__':
    main()
