package rootonly

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
)

// Each way another user could change what root runs is refused, naming the
// path: the file's owner or mode, a directory above it, a symlink on the
// way or the directory its target lies in. A sticky directory (as /tmp)
// and links that stay root's pass.
func TestCheck(t *testing.T) {
	testenv.RequireRoot(t)
	const user = 1000
	for _, tc := range []struct {
		name string
		make func(t *testing.T, r string) // under r, the root
		want string                       // "" passes; else in the error, after the path
		bad  string                       // the path the error names, under r
	}{
		{"root's", func(t *testing.T, r string) {}, "", ""},
		{"the file is a user's", func(t *testing.T, r string) { chown(t, r+"/opt/node/bin/node") }, "is owned by uid 1000", "/opt/node/bin/node"},
		{"the file is group-writable", func(t *testing.T, r string) { chmod(t, r+"/opt/node/bin/node", 0o775) }, "is writable by its group (mode 0775)", "/opt/node/bin/node"},
		{"a directory above is a user's", func(t *testing.T, r string) { chown(t, r+"/opt/node") }, "(a directory on the way) is owned by uid 1000", "/opt/node"},
		{"a directory above is world-writable", func(t *testing.T, r string) { chmod(t, r+"/opt", 0o777) }, "writable by its group and everyone (mode 0777)", "/opt"},
		{"a sticky directory above", func(t *testing.T, r string) { chmod(t, r+"/opt", 0o1777) }, "", ""},
		{"a symlink on the way is a user's", func(t *testing.T, r string) {
			link(t, "/opt/node/bin/node", r+"/usr/bin/node")
			lchown(t, r+"/usr/bin/node")
		}, "(a symlink on the way) is owned by uid 1000", "/usr/bin/node"},
		{"a link into a user's directory", func(t *testing.T, r string) {
			mkfile(t, r+"/home/u/node", 0o755)
			chown(t, r+"/home/u")
			link(t, "../../home/u/node", r+"/usr/bin/node")
		}, "(a directory on the way) is owned by uid 1000", "/home/u"},
		{"an absolute link stays in the root", func(t *testing.T, r string) {
			link(t, "/opt/node/bin/node", r+"/usr/bin/node")
		}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := t.TempDir()
			chmod(t, r, 0o755)
			mkfile(t, r+"/opt/node/bin/node", 0o755)
			os.MkdirAll(r+"/usr/bin", 0o755)
			tc.make(t, r)
			target := "/opt/node/bin/node"
			if _, err := os.Lstat(r + "/usr/bin/node"); err == nil {
				target = "/usr/bin/node"
			}
			err := Check(r, target, 0)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), r+tc.bad+" ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q naming %s", err, tc.want, r+tc.bad)
			}
			// The same owner is accepted when named.
			if strings.Contains(tc.want, "uid 1000") {
				if err := Check(r, target, 0, user); err != nil {
					t.Errorf("with uid 1000 allowed: %v", err)
				}
			}
		})
	}
	// The host's own Node, if any, passes as the host has it.
	if err := Check("", "/usr/bin/env", 0); err != nil {
		t.Errorf("/usr/bin/env: %v", err)
	}
}

func mkfile(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, p string) {
	t.Helper()
	if err := os.Chown(p, 1000, 1000); err != nil {
		t.Fatal(err)
	}
}

func lchown(t *testing.T, p string) {
	t.Helper()
	if err := os.Lchown(p, 1000, 1000); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, p string, m os.FileMode) {
	t.Helper()
	if m&0o1000 != 0 {
		m = m&0o777 | os.ModeSticky
	}
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}
