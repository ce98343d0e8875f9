package guard

import "fmt"

// Script is the /bin/sh script installed at ScriptPath(hook).
func Script(hook string) []byte { return script(hook, HelperPath) }

// script fails closed: both agents let a prompt through when a hook fails in
// any way but exit 2 (a missing file, a crash, a signal), so every such
// failure is turned into exit 2 with a reason on stderr, which Codex needs
// non-empty to count the exit as a block. stdin, the agent's hook JSON, is
// inherited by the helper untouched.
func script(hook, helper string) []byte {
	return fmt.Appendf(nil, `#!/bin/sh
# cco guard: %[1]s. Installed by cco-install; `+"`cco-install status`"+` reports any change.
# Fails closed: anything but the helper's own exit 0 or 2 becomes exit 2.
helper=%[2]s
if [ ! -x "$helper" ]; then
	echo "cco guard: $helper is missing, so this is blocked: reinstall cco with 'sudo cco-install', then start the agent again" >&2
	exit 2
fi
"$helper" guard %[1]s "$@"
rc=$?
case $rc in
0 | 2) exit $rc ;;
esac
echo "cco guard: '$helper guard %[1]s' failed (exit $rc), so this is blocked: run 'sudo cco-install status' and reinstall cco" >&2
exit 2
`, hook, helper)
}
