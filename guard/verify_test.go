package guard

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/sandbox"
)

// fakeProc builds a /proc with the files the checks read.
func fakeProc(t *testing.T, pid1, netdev string) string {
	t.Helper()
	d := t.TempDir()
	os.MkdirAll(filepath.Join(d, "1"), 0o755)
	os.MkdirAll(filepath.Join(d, "self/net"), 0o755)
	os.WriteFile(filepath.Join(d, "1/comm"), []byte(pid1+"\n"), 0o644)
	os.WriteFile(filepath.Join(d, "self/net/dev"), []byte("Inter-|   Receive\n face |bytes\n"+netdev), 0o644)
	return d
}

func TestVerifierChecks(t *testing.T) {
	lo := "    lo: 0 0 0\n"
	eth := lo + "  eth0: 0 0 0\n"
	cases := []struct {
		name      string
		pid1, net string
		egress    string
		home      string
		check     func(*sandbox.Marker, map[string]string) error
		wantErr   string // "" for a pass
	}{
		{"pid 1 is bwrap", "bwrap", lo, "off", "/h", checkPidNS, ""},
		{"pid 1 is the helper", "sandbox-helper", lo, "off", "/h", checkPidNS, ""},
		{"pid 1 is the host's init", "systemd", lo, "off", "/h", checkPidNS, `pid 1 is "systemd"`},
		{"egress host may see eth0", "bwrap", eth, "host", "/h", checkEgress, ""},
		{"egress allowlist sees only lo", "bwrap", lo, "allowlist", "/h", checkEgress, ""},
		{"egress public sees eth0", "bwrap", eth, "public", "/h", checkEgress, `egress is "public" but the jail sees eth0`},
		{"egress unknown", "bwrap", lo, "vpn", "/h", checkEgress, `egress "vpn"`},
		{"HOME relative", "bwrap", lo, "off", "h", checkMasks, `HOME is "h"`},
		{"HOME unset", "bwrap", lo, "off", "", checkOtherLogin, `HOME is ""`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := procDir
			defer func() { procDir = old }()
			procDir = fakeProc(t, c.pid1, c.net)
			err := c.check(&sandbox.Marker{Schema: 1, Agent: "claude", Egress: c.egress}, map[string]string{"HOME": c.home})
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("err %v, want %q", err, c.wantErr)
			}
		})
	}
}

// A variable the agent sets for its own children (its profile's ChildEnv,
// such as Claude Code's CLAUDE_CODE_MESSAGING_TOKEN for its hooks) is no
// host token in its own jail; in another agent's jail it still is.
func TestVerifierChildEnv(t *testing.T) {
	if p, _ := agent.Lookup("claude"); !slices.Contains(p.ChildEnv, "CLAUDE_CODE_MESSAGING_TOKEN") {
		t.Fatalf("claude's ChildEnv %q lacks CLAUDE_CODE_MESSAGING_TOKEN", p.ChildEnv)
	}
	for _, name := range agent.Names() {
		p, _ := agent.Lookup(name)
		m := &sandbox.Marker{Schema: 1, Agent: name, Egress: "off"}
		for _, k := range p.ChildEnv {
			if err := checkEnvTokens(m, map[string]string{k: "x"}); err != nil {
				t.Errorf("%s's own %s reported: %v", name, k, err)
			}
			for _, other := range agent.Names() {
				op, _ := agent.Lookup(other)
				if other == name || slices.Contains(op.ChildEnv, k) {
					continue
				}
				om := &sandbox.Marker{Schema: 1, Agent: other, Egress: "off"}
				if err := checkEnvTokens(om, map[string]string{k: "x"}); err == nil {
					t.Errorf("%s's %s passes in %s's jail", name, k, other)
				}
			}
		}
	}
}
