package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// Hostile bytes a user, a session or a mirror could choose: OSC 52 (a
// clipboard write), OSC 0 (the window title), a CSI colour, C1 CSI and OSC
// raw and as UTF-8, a bidi override; newlines are added where they fit.
const (
	osc52 = "\x1b]52;c;ZXZpbA==\x07"
	osc0  = "\x1b]0;pwned\x07"
	csi   = "\x1b[31m"
	c1    = "\x9b2J\u009d0;t\x07"
	bidi  = "\u202e"
)

// printed is one run's output, and what it was.
type printed struct {
	what, stdout, stderr string
}

// cleanOutput fails for each character of out a terminal would act on: a
// byte below 0x20 but \n and \t, DEL, a C1 control (raw, which is invalid
// UTF-8, or as UTF-8), a bidi control or a line or paragraph separator.
func cleanOutput(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("LEAK: %s is not valid UTF-8 (a raw C1 byte?): %q", what, out)
		return
	}
	for i, r := range out {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f ||
			r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x2028 || r == 0x2029 {
			t.Errorf("LEAK: %s holds %U at %d: %q", what, r, i, out[max(0, i-30):min(len(out), i+30)])
			return
		}
	}
}

// TestHostileValuesPrintNoControlBytes: a home whose path holds escape
// sequences (with a vendor's PATH block in its .bashrc), a vendor install
// whose link target holds them and a newline, an owned file edited to hold
// them (shown by --diff), a foreign policy file, a sandbox.toml value, a
// version string the mirror serves, install.toml values and keys, a CCO_*
// variable's name, and command-line values: cco-install's stdout and
// stderr (a plain run, --diff, status, config, --upgrade, refusals) hold
// none of them raw, each is shown escaped on its line, and --json stays a
// document that decodes to the values as they are.
func TestHostileValuesPrintNoControlBytes(t *testing.T) {
	st, root, shadow, env := storeRoot(t, "claude")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	proxy := filepath.Join(t.TempDir(), "proxy")
	os.WriteFile(proxy, fakeEgressProxy, 0o755)
	t.Setenv("CCO_SHADOW_PATH", shadow)
	t.Setenv("CCO_EGRESS_PROXY_PATH", proxy)
	t.Setenv("CCO_IMAGE", "no")
	t.Setenv("CCO_DOWNLOAD_BACKOFF", "10ms")
	t.Setenv("CCO_DOWNLOAD_RETRIES", "1")
	t.Setenv("CCO_USERS", "alice,mallory")
	write := func(p, s string, mode os.FileMode) {
		t.Helper()
		p = filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	home := "/home/m" + osc52 + c1 + bidi
	write("etc/passwd", "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/bash\nmallory:x:1001:1001::"+home+":/bin/bash\n", 0o644)
	write(home+"/.bashrc", "# Added by Claude Code\nexport PATH=\"$HOME/.local/bin:$PATH\"\n", 0o644)
	target := "/home/alice/.local/share/claude/versions/2.1.328" + osc0 + "\n" + c1 + bidi
	write(target, "#!/bin/sh\n", 0o755)
	os.MkdirAll(filepath.Join(root, "home/alice/.local/bin"), 0o755)
	if err := os.Symlink(target, filepath.Join(root, "home/alice/.local/bin/claude")); err != nil {
		t.Fatal(err)
	}
	write("etc/codex/requirements.toml", "allowed = \"pol"+osc52+"\n\u009b"+bidi+"\"\n", 0o644)

	var runs []printed
	do := func(args ...string) printed {
		t.Helper()
		var out, errOut bytes.Buffer
		run(args, strings.NewReader(""), &out, &errOut)
		p := printed{strings.Join(args, " "), out.String(), errOut.String()}
		runs = append(runs, p)
		return p
	}
	first := do("--root", root)
	// Once installed: an owned file edited, sandbox.toml rewritten, and a
	// mirror that serves a hostile version.
	write("usr/libexec/cco/egress-proxy", "#!/bin/sh\necho diff"+csi+osc52+"\n\u009d"+bidi+"\r\n", 0o755)
	write("etc/cco/sandbox.toml", `egress = "sbx\u001b]52;c;ZXZpbA==\u0007\u009b\u202e"`+"\n", 0o644)
	st.stable.Store("2.1.333" + osc0 + c1 + bidi)
	diff := do("--root", root, "--diff")
	do("--root", root, "--diff", "--dry-run")
	upgrade := do("--root", root, "--upgrade", "claude")
	status := do("status", "--root", root)
	statusJSON := do("status", "--root", root, "--json")
	runJSON := do("--root", root, "--json", "--dry-run", "--diff")
	badFlag := do("--root", root, "--upgrade", "x"+osc0+c1+bidi)
	badRoot := do("--root", root+"/no"+osc0+"\nforged", "status")
	// The configuration's own values, keys and a CCO_* variable's name.
	write("etc/cco/install.toml", `users = ["alice", "cfg\u009b31m\u202e"]`+"\n"+`"key\u001b]0;t\u0007" = 1`+"\n", 0o644)
	t.Setenv("CCO_ENV"+osc0, "1")
	os.Unsetenv("CCO_USERS")
	config := do("config", "--root", root)
	configJSON := do("config", "--root", root, "--json")
	do("status", "--root", root)
	refused := do("--root", root)

	for _, p := range runs {
		cleanOutput(t, p.what+": stdout", p.stdout)
		cleanOutput(t, p.what+": stderr", p.stderr)
	}
	// Each hostile value was printed, escaped where it sits.
	for _, c := range []struct {
		p    printed
		out  string
		want string
	}{
		{first, first.stdout, `(/home/alice/.local/share/claude/versions/2.1.328\x1b]0;pwned\a\n\x9b2J\u009d0;t\a\u202e)`},
		{status, status.stdout, `warning  /home/m\x1b]52;c;ZXZpbA==\a\x9b2J\u009d0;t\a\u202e/.bashrc lines 1-2`},
		{status, status.stdout, `egress "sbx\x1b]52;c;ZXZpbA==\a\u009b\u202e"`},
		{diff, diff.stdout, "\n-echo diff\\x1b[31m\\x1b]52;c;ZXZpbA==\\a\n-\\u009d\\u202e\\r\n+echo egress-proxy\n"},
		{upgrade, upgrade.stdout, `"2.1.333\x1b]0;pwned\a\x9b2J\u009d0;t\a\u202e" is not a version`},
		{config, config.stdout, `users = ["alice","cfg\u009b31m\u202e"]  # file `},
		{config, config.stderr, `the environment variable CCO_ENV\x1b]0;pwned\a sets no configuration key`},
		{refused, refused.stderr, `unknown key "key\x1b]0;t\a"`},
		{refused, refused.stderr, "\n(nothing was changed: fix the configuration, then run again)\n"},
		{badFlag, badFlag.stderr, `--upgrade x\x1b]0;pwned\a\x9b2J\u009d0;t\a\u202e: want`},
		{badRoot, badRoot.stderr, `/no\x1b]0;pwned\a\nforged`},
	} {
		if !strings.Contains(c.out, c.want) {
			t.Errorf("%s: the output does not show %s:\n%s", c.p.what, c.want, c.out)
		}
	}
	// A refusal that quotes a value is one line: the newline in the value
	// starts none.
	for _, p := range []printed{badRoot} {
		if strings.Contains(p.stderr, "\nforged") {
			t.Errorf("%s: a value started a line of its own:\n%s", p.what, p.stderr)
		}
	}
	// --json is one document, and the values in it are as they are.
	for _, c := range []struct {
		p    printed
		want string
	}{
		// encoding/json writes invalid UTF-8 (the raw C1 byte) as U+FFFD.
		{statusJSON, "/home/m" + osc52 + "\ufffd2J\u009d0;t\x07" + bidi + "/.bashrc lines 1-2"},
		{runJSON, "echo diff" + csi + osc52 + "\n"},
		{configJSON, "cfg\u009b31m\u202e"},
	} {
		var doc any
		if err := json.Unmarshal([]byte(c.p.stdout), &doc); err != nil {
			t.Errorf("%s: not one JSON document: %v\n%s", c.p.what, err, c.p.stdout)
			continue
		}
		if !strings.Contains(fmt.Sprint(doc), c.want) {
			t.Errorf("%s: the document lost the value %q:\n%s", c.p.what, c.want, c.p.stdout)
		}
	}
}
