package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
)

// The launch refuses an interpreter that someone but root can change: the
// Node the link names, or a directory above it, writable by a user. The
// refusal names the path and the fix; a root-owned Node passes.
func TestMissingRefusesANodeNotRootsAlone(t *testing.T) {
	testenv.RequireRoot(t)
	var p *Profile
	for _, q := range All() {
		if q.Interpreter != "" {
			p = q
		}
	}
	if p == nil {
		t.Fatal("no profile has an interpreter")
	}
	for _, tc := range []struct {
		name  string
		spoil func(node string)
		want  string // "" passes
	}{
		{"root's", func(string) {}, ""},
		{"the Node is a user's", func(node string) { os.Chown(node, 1000, 1000) }, "is owned by uid 1000"},
		{"a directory above is world-writable", func(node string) { os.Chmod(filepath.Dir(node), 0o777) }, "(a directory on the way) is writable by its group and everyone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			node := filepath.Join(t.TempDir(), "opt/node/bin/node")
			for file, body := range map[string]string{root + p.Binary: "", node: "#!/bin/sh\n"} {
				os.MkdirAll(filepath.Dir(file), 0o755)
				if err := os.WriteFile(file, []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			os.MkdirAll(filepath.Dir(root+p.Interpreter), 0o755)
			if err := os.Symlink(node, root+p.Interpreter); err != nil {
				t.Fatal(err)
			}
			tc.spoil(node)
			err := p.Missing(root)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused a root-owned Node: %v", err)
				}
				return
			}
			for _, w := range []string{"the " + p.Name + " interpreter " + root + p.Interpreter + " is not root's alone", tc.want, "chown root:root", "sudo cco-install --upgrade " + p.Upgrade} {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Missing = %v, want %q in it", err, w)
				}
			}
		})
	}
}
