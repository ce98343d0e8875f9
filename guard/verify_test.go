package guard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
