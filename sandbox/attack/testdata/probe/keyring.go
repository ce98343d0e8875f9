package main

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Keys names a key in the invoking session's keyring, and that keyring.
type Keys struct {
	Serial int    `json:"serial"`
	Ring   int    `json:"ring"`
	Desc   string `json:"desc"`
}

// keys tries to reach the invoking session's keys every way the kernel
// offers: read, search, change and delete them, add keys, join or leave
// keyrings, and list what /proc/keys shows. A key it reads is printed and
// copied into the workspace.
func keys(k *Keys) {
	b, err := os.ReadFile("/proc/keys")
	report["keys:proc"] = res(err) + " " + string(b)
	id, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	report["keys:session"] = res(err)
	if err == nil {
		report["keys:session"] = fmt.Sprintf("ok %d", id)
	}
	buf := make([]byte, 4096)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, k.Serial, buf, 0)
	report["keys:read"] = res(err)
	if err == nil && n <= len(buf) {
		fmt.Fprintf(os.Stderr, "probe: key %d: %s\n", k.Serial, buf[:n])
		os.WriteFile("loot-key", buf[:n], 0o644)
	}
	desc, err := unix.KeyctlString(unix.KEYCTL_DESCRIBE, k.Serial)
	report["keys:describe"] = res(err)
	if err == nil && strings.Contains(desc, k.Desc) {
		report["keys:describe"] = "ok " + desc
	}
	_, err = unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", k.Desc, 0)
	report["keys:search"] = res(err)
	_, err = unix.RequestKey("user", k.Desc, "", unix.KEY_SPEC_SESSION_KEYRING)
	report["keys:request"] = res(err)
	_, err = unix.AddKey("user", "cco-probe", []byte("planted"), unix.KEY_SPEC_SESSION_KEYRING)
	report["keys:add"] = res(err)
	_, err = unix.AddKey("user", "cco-probe", []byte("planted"), k.Ring)
	report["keys:add_host"] = res(err)
	// In this order: each step but the last ones leaves the key to the next.
	for _, op := range []struct {
		name string
		args [3]int
	}{
		{"setperm", [3]int{unix.KEYCTL_SETPERM, k.Serial, 0x3f3f3f3f}},
		{"link", [3]int{unix.KEYCTL_LINK, k.Serial, unix.KEY_SPEC_SESSION_KEYRING}},
		{"user", [3]int{unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_USER_KEYRING, 0}},
		{"persistent", [3]int{unix.KEYCTL_GET_PERSISTENT, -1, unix.KEY_SPEC_SESSION_KEYRING}},
		{"to_parent", [3]int{unix.KEYCTL_SESSION_TO_PARENT, 0, 0}},
		{"unlink", [3]int{unix.KEYCTL_UNLINK, k.Serial, k.Ring}},
		{"clear", [3]int{unix.KEYCTL_CLEAR, k.Ring, 0}},
		{"revoke", [3]int{unix.KEYCTL_REVOKE, k.Serial, 0}},
		{"invalidate", [3]int{unix.KEYCTL_INVALIDATE, k.Serial, 0}},
	} {
		_, err := unix.KeyctlInt(op.args[0], op.args[1], op.args[2], 0, 0)
		report["keys:"+op.name] = res(err)
	}
	_, err = unix.KeyctlJoinSessionKeyring("_ses")
	report["keys:join"] = res(err)
}
