package attack

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/sandbox/caches"
)

// TestCacheTreeChecked: ~/.cache/cco and the agent's tree are checked at
// every launch, not only when made. A mode another user could read
// through is made 0700 again, with a note; a link where the agent's tree
// was (to a tree the session could then share with another user) or a
// tree another user owns refuses the launch (126) naming the path, and
// the fix, run as the user as written, makes the next launch work. The
// verdict is on the host: the modes and owners after each launch, the
// shadow's stderr, and where the session's cache writes landed.
func TestCacheTreeChecked(t *testing.T) {
	r := shared.Get(t)
	fixRE := regexp.MustCompile(`\(fix: (.*)\)`)
	for _, u := range users {
		t.Run(u.Name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, u)
			cco := filepath.Join(w.Home, caches.Root)
			tree := caches.Dir(w.Home, "claude")
			run := func(step string) jailtest.Result {
				t.Helper()
				sess := w.launch(t, r, "claude", w.ws, probe{Steps: steps("write", "echo x > ~/.cache/cco-npm/written && echo DONE")})
				t.Logf("%s: exit %d\nstderr %s", step, sess.Code, sess.Stderr)
				return sess
			}
			if sess := run("first"); sess.Code != 0 {
				t.Fatalf("first launch: exit %d", sess.Code)
			}
			// Widened modes: repaired on the descriptor, with a note.
			os.Chmod(cco, 0o755)
			os.Chmod(tree, 0o777)
			sess := run("widened")
			succeeded(t, sess, "write")
			for _, p := range []string{cco, tree} {
				if fi, err := os.Lstat(p); err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
					t.Errorf("after a launch, %s is %v (%v), want 0700", p, fi.Mode(), err)
				}
				if !strings.Contains(sess.Stderr, "made the cache directory "+p+" mode 0700") {
					t.Errorf("no note of the repair of %s", p)
				}
			}
			fix := func(c jailtest.Result, want string) {
				t.Helper()
				if c.Code != 126 || !strings.Contains(c.Stderr, want) {
					t.Fatalf("exit %d, stderr %s: want 126 naming %s", c.Code, c.Stderr, want)
				}
				m := fixRE.FindStringSubmatch(c.Stderr)
				if m == nil {
					t.Fatalf("the refusal names no fix: %s", c.Stderr)
				}
				sh := exec.Command("/bin/sh", "-c", m[1])
				sh.Dir, sh.Env = w.Home, w.Env()
				sh.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID)}}
				if out, err := sh.CombinedOutput(); err != nil {
					t.Fatalf("the fix %q, run as %s: %v\n%s", m[1], u.Name, err, out)
				}
				if again := run("after the fix"); again.Code != 0 {
					t.Fatalf("after the fix %q the launch exits %d", m[1], again.Code)
				}
			}
			// A link in place of the agent's tree, to a directory anyone
			// can write.
			shared := filepath.Join(w.Base, "shared-cache")
			os.Mkdir(shared, 0o777)
			os.Chmod(shared, 0o777)
			os.RemoveAll(tree)
			os.Symlink(shared, tree)
			os.Lchown(tree, u.UID, u.GID)
			fix(run("link"), tree)
			if ents, _ := os.ReadDir(shared); len(ents) != 0 {
				t.Errorf("LEAK: the session wrote through the link: %v", ents)
			}
			// Another user's tree.
			other := 4242
			os.Chown(tree, other, other)
			fix(run("another owner"), tree)
			if fi, err := os.Stat(tree); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(u.UID) {
				t.Errorf("after the fix, %s is not the user's", tree)
			}
			if _, err := os.Stat(filepath.Join(tree, "cco-npm/written")); err != nil {
				t.Errorf("the session's cache write did not land in the fresh tree: %v", err)
			}
		})
	}
}
