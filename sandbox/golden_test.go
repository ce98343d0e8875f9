package sandbox

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox/egress/policy"
	"github.com/cco-dev/cco/sandbox/hostview"
	"github.com/cco-dev/cco/sandbox/pty"
)

var update = flag.Bool("update", false, "rewrite testdata/argv/*.golden from the argv the launches make")

// TestArgvGolden: the argv a launch hands bwrap, per profile and mode, with
// its descriptors numbered by the donation as a launch numbers them, is
// the golden file's (testdata/argv/<profile>-<mode>.golden, one argument a
// line, the fixture's directory as $BASE). A change to the jail reviews as
// a diff of these files: go test ./sandbox -run ArgvGolden -update.
func TestArgvGolden(t *testing.T) {
	f := newFixture(t)
	// The host's own sockets, RAM and accounts would make the files differ
	// from machine to machine.
	empty := filepath.Join(t.TempDir(), "unix")
	testenv.Must(t, os.WriteFile(empty, []byte("Num RefCount Protocol Flags Type St Inode Path\n"), 0o600))
	old := procNetUnix
	procNetUnix = empty
	defer func() { procNetUnix = old }()
	// And a host of its own: cgroup v2, one other user.
	fake := func(v *string, name, text string) {
		p := filepath.Join(t.TempDir(), name)
		testenv.Must(t, os.WriteFile(p, []byte(text), 0o600))
		old := *v
		*v = p
		t.Cleanup(func() { *v = old })
	}
	oldHost := sysHost
	sysHost = func() hostview.Host {
		return hostview.Host{Exists: func(string) bool { return true }, FSType: func(p string) int64 {
			if p == "/sys/fs/cgroup" {
				return 0x63677270 // cgroup2
			}
			return 0
		}, Cgroup: "0::/user.slice/user-1000.slice/session-1.scope\n"}
	}
	t.Cleanup(func() { sysHost = oldHost })
	fake(&etcPasswd, "passwd", "root:x:0:0::/root:/bin/bash\nada:x:1000:1000::/home/ada:/bin/bash\nbob:x:1001:1001::/srv/cco-golden-no-such-home:/bin/bash\n")
	base := filepath.Dir(filepath.Dir(f.ws))
	socket := filepath.Join(f.rt, "egress.sock")
	for _, name := range []string{"claude", "codex"} {
		for _, m := range []struct {
			mode     string
			egress   string
			direct   bool
			terminal bool
		}{
			{"egress-launcher-endpoint", policy.ModePublic, true, false},
			{"egress-helper-endpoint", policy.ModeAllowlist, false, false},
			{"offline-direct", policy.ModeOff, true, false},
			{"offline-helper", policy.ModeOff, false, false},
			{"terminal", policy.ModePublic, false, true},
		} {
			t.Run(name+"-"+m.mode, func(t *testing.T) {
				p, _ := agent.Lookup(name)
				l := &Launch{Profile: p, Config: &Config{TmpfsSize: Size{Bytes: 1 << 30}, MaxProcs: 100}, Home: f.home, User: "ada", UID: 1000,
					Cwd: f.ws, Environ: []string{"TERM=xterm", "LANG=C.UTF-8"}, Session: "golden", Args: []string{"hi"},
					Direct: m.direct, Egress: m.egress, Terminal: m.terminal}
				if m.egress != policy.ModeOff {
					l.EgressSocket, l.HostEndpoint = socket, true
				}
				s, _, err := Plan(l)
				if err != nil {
					t.Fatal(err)
				}
				d := &donation{prog: []byte("seccomp"), endpoint: s.endpoint == endpointLauncher, helper: s.endpoint == endpointHelper}
				if m.terminal {
					d.setup = &pty.Setup{}
				}
				argv := s.argv(d)
				d.abandon()
				if d.err != nil {
					t.Fatal(d.err)
				}
				got := strings.ReplaceAll(strings.Join(argv, "\n")+"\n", base, "$BASE")
				path := filepath.Join("testdata/argv", name+"-"+m.mode+".golden")
				if *update {
					testenv.Must(t, os.WriteFile(path, []byte(got), 0o644))
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (fix: go test ./sandbox -run ArgvGolden -update)", err)
				}
				if got != string(want) {
					t.Errorf("the argv differs from %s (if the change is meant, go test ./sandbox -run ArgvGolden -update, and review the diff):\n%s", path, lineDiff(string(want), got))
				}
			})
		}
	}
}

// lineDiff lists the lines that differ, position by position.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			b.WriteString("line " + itoa(int64(i+1)) + ": want " + a + "\n        got  " + c + "\n")
		}
	}
	return b.String()
}
