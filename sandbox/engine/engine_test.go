package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChoose(t *testing.T) {
	defer func(h func() bool, own bool, d string) { hasMountAPI, ownByDefault, Default = h, own, d }(hasMountAPI, ownByDefault, Default)
	for _, c := range []struct {
		env, def string
		api, own bool
		want     Kind
		err      string
	}{
		{env: "", api: true, own: true, want: CCO},
		{env: "auto", api: false, own: true, want: Bwrap},
		{env: "", api: true, own: false, want: Bwrap},
		{env: "bwrap", api: true, own: true, want: Bwrap},
		{env: "cco", api: true, want: CCO},
		{env: "cco", api: false, err: "has no mount_setattr"},
		{env: "runc", api: true, err: `CCO_JAIL_ENGINE="runc" is not an engine (fix: set it to cco, bwrap or auto`},
		{def: "bwrap", api: true, own: true, want: Bwrap},
		{env: "cco", def: "bwrap", api: true, want: CCO},
	} {
		hasMountAPI = func() bool { return c.api }
		ownByDefault, Default = c.own, c.def
		got, err := Choose(func(k string) string {
			if k == EnvVar {
				return c.env
			}
			return ""
		})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: %v, want an error with %q", c, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: %q, %v; want %q", c, got, err, c.want)
		}
	}
}

// TestParseRefuses: an operation the engine does not know, or one it
// cannot carry out as stated, refuses the jail: a protection skipped would
// be lost.
func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--ro-bind", "/", "/", "--overlay-src", "/x", "--", "a"}, `"--overlay-src" is not an operation`},
		{[]string{"--cap-add", "CAP_SYS_ADMIN", "--", "a"}, `"--cap-add" is not an operation`},
		{[]string{"--cap-drop", "CAP_NET_RAW", "--", "a"}, "the jail drops ALL"},
		{[]string{"--uid", "1000", "--", "a"}, "only root's view"},
		{[]string{"--seccomp", "x", "--", "a"}, "not a descriptor"},
		{[]string{"--bind-fd", "2", "/w", "--", "a"}, "not a descriptor"},
		{[]string{"--size", "-1", "--tmpfs", "/tmp", "--", "a"}, "not a size"},
		{[]string{"--perms", "0999", "--tmpfs", "/tmp", "--", "a"}, "not a mode"},
		{[]string{"--tmpfs"}, "needs 1 argument"},
		{[]string{"--ro-bind", "/", "/"}, "no -- before the command"},
		{[]string{"--ro-bind", "/", "/", "--"}, "no command"},
	} {
		if _, err := parse(c.args); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %v, want %q", c.args, err, c.err)
		}
	}
}

// TestParse: the operations keep their order, and --size and --perms
// belong to the next one alone.
func TestParse(t *testing.T) {
	p, err := parse([]string{"--unshare-net", "--uid", "0", "--gid", "0", "--disable-userns", "--seccomp", "3", "--json-status-fd", "4",
		"--clearenv", "--setenv", "A", "b=c", "--ro-bind", "/", "/", "--size", "100", "--perms", "0700", "--tmpfs", "/h",
		"--tmpfs", "/t", "--bind-fd", "5", "/w", "--perms", "0444", "--ro-bind-data", "6", "/m", "--chdir", "/w", "--", "cmd", "--x"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.unshareNet || !p.rootView || !p.disableUserns || !p.clearenv || p.seccompFD != 3 || p.statusFD != 4 || p.chdir != "/w" ||
		len(p.env) != 1 || p.env[0] != "A=b=c" || strings.Join(p.command, " ") != "cmd --x" {
		t.Fatalf("%+v", p)
	}
	want := []op{{kind: "--ro-bind", src: "/", dst: "/"}, {kind: "--tmpfs", dst: "/h", size: 100, mode: 0o700, perms: true},
		{kind: "--tmpfs", dst: "/t"}, {kind: "--bind-fd", fd: 5, dst: "/w"}, {kind: "--ro-bind-data", fd: 6, dst: "/m", mode: 0o444, perms: true}}
	if len(p.ops) != len(want) {
		t.Fatalf("%+v", p.ops)
	}
	for i := range want {
		if p.ops[i] != want[i] {
			t.Errorf("op %d: %+v, want %+v", i, p.ops[i], want[i])
		}
	}
}

// TestParseGoldens: every jail the launch's golden argv files hold (one
// argument a line) is one the engine can build.
func TestParseGoldens(t *testing.T) {
	files, _ := filepath.Glob("../testdata/argv/*.golden")
	if len(files) == 0 {
		t.Fatal("no golden argv files")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parse(strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
