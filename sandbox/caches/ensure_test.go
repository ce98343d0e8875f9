package caches

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func tree(t *testing.T) (home string, dirs []string) {
	home = t.TempDir()
	root := Dir(home, "claude")
	return home, []string{root, filepath.Join(root, "cco-npm"), filepath.Join(root, "cco-go-mod")}
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// fixOf is the command a refusal's fix names.
var fixRE = regexp.MustCompile(`\(fix: (.*)\)$`)

// applyFix runs err's fix as the user would, in a shell, and fails unless
// the next Ensure succeeds.
func applyFix(t *testing.T, err error, home string, uid int, dirs []string) {
	t.Helper()
	m := fixRE.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("refusal without a fix: %v", err)
	}
	if out, err := exec.Command("/bin/sh", "-c", m[1]).CombinedOutput(); err != nil {
		t.Fatalf("the fix %q: %v\n%s", m[1], err, out)
	}
	if _, err := Ensure(home, uid, dirs, "/etc/cco/sandbox.toml"); err != nil {
		t.Fatalf("after the fix %q: %v", m[1], err)
	}
	for _, d := range dirs[:1] {
		if got := mode(t, d); !got.IsDir() || got.Perm() != Mode {
			t.Errorf("after the fix: %s is %v", d, got)
		}
	}
}

// TestEnsureMakesAndRepairs: a missing tree is made 0700; one of the
// user's with a wider mode is made 0700 again, with a note; a link a
// session left in place of a directory of the tree is replaced.
func TestEnsureMakesAndRepairs(t *testing.T) {
	home, dirs := tree(t)
	uid := os.Geteuid()
	notes, err := Ensure(home, uid, dirs, "/etc/cco/sandbox.toml")
	if err != nil || len(notes) != 0 {
		t.Fatalf("Ensure = %q, %v", notes, err)
	}
	for _, d := range append([]string{filepath.Join(home, Root)}, dirs...) {
		if m := mode(t, d); !m.IsDir() || m.Perm() != Mode {
			t.Errorf("%s is %v, want a directory, 0700", d, m)
		}
	}
	os.Chmod(filepath.Join(home, Root), 0o755)
	os.Chmod(dirs[0], 0o777)
	os.Remove(dirs[1])
	os.Symlink("/etc", dirs[1])
	notes, err = Ensure(home, uid, dirs, "/etc/cco/sandbox.toml")
	if err != nil || len(notes) != 2 || !strings.Contains(notes[0], filepath.Join(home, Root)+" mode 0700 (it was 0755)") || !strings.Contains(notes[1], "0777") {
		t.Fatalf("Ensure = %q, %v, want a note for each repair", notes, err)
	}
	for _, d := range []string{filepath.Join(home, Root), dirs[0], dirs[1]} {
		if m := mode(t, d); !m.IsDir() || m.Perm() != Mode {
			t.Errorf("after the repair %s is %v", d, m)
		}
	}
}

// TestEnsureRefuses: a link at ~/.cache/cco or at the agent's tree, a file
// there, and a directory another user owns each refuse the launch, naming
// the path; the fix, run as written, makes the next launch work, and a
// refusal changes nothing.
func TestEnsureRefuses(t *testing.T) {
	uid := os.Geteuid()
	other := 4243
	if uid == other {
		other = 4244
	}
	for name, c := range map[string]struct {
		prep func(home string, dirs []string)
		want string
	}{
		"link at ~/.cache/cco": {func(home string, _ []string) {
			os.MkdirAll(filepath.Join(home, ".cache"), 0o700)
			os.MkdirAll(filepath.Join(home, "elsewhere"), 0o777)
			os.Symlink(filepath.Join(home, "elsewhere"), filepath.Join(home, Root))
		}, "symbolic link"},
		"link at the agent's tree": {func(home string, dirs []string) {
			os.MkdirAll(filepath.Join(home, Root), 0o700)
			os.Symlink("/tmp", dirs[0])
		}, "symbolic link"},
		"file at the agent's tree": {func(home string, dirs []string) {
			os.MkdirAll(filepath.Join(home, Root), 0o700)
			os.WriteFile(dirs[0], nil, 0o600)
		}, "or a file"},
		"another user's tree": {func(home string, dirs []string) {
			os.MkdirAll(dirs[1], 0o700)
			os.WriteFile(filepath.Join(dirs[1], "planted"), nil, 0o644)
			os.Chown(filepath.Join(dirs[1], "planted"), other, other)
			os.Chown(dirs[1], other, other)
			os.Chown(dirs[0], other, other)
		}, "owned by uid"},
	} {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(name, "another") && uid != 0 {
				t.Skip("needs root to give a directory away")
			}
			home, dirs := tree(t)
			c.prep(home, dirs)
			before := listing(t, home)
			_, err := Ensure(home, uid, dirs, "/etc/cco/sandbox.toml")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), home) {
				t.Fatalf("Ensure = %v, want a refusal naming the path and %q", err, c.want)
			}
			if after := listing(t, home); after != before {
				t.Errorf("a refusal changed the tree:\n%s\n---\n%s", before, after)
			}
			applyFix(t, err, home, uid, dirs)
		})
	}
	// ~/.cache as a link is the user's own: the fix does not remove it.
	home, dirs := tree(t)
	os.MkdirAll(filepath.Join(home, "disk"), 0o700)
	os.Symlink(filepath.Join(home, "disk"), filepath.Join(home, ".cache"))
	if _, err := Ensure(home, uid, dirs, "/etc/cco/sandbox.toml"); err == nil || !strings.Contains(err.Error(), `caches = "session"`) || strings.Contains(err.Error(), "rm ") {
		t.Errorf("~/.cache a link: %v, want the caches key as the fix", err)
	}
}

func listing(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			b.WriteString(p + " " + fi.Mode().String() + "\n")
		}
		return nil
	})
	return b.String()
}
