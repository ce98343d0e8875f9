package attack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/internal/keytest"
	"github.com/cco-dev/cco/sandbox/rootview"
)

// keys is the probe's keyring step (testdata/probe's Keys): a key of the
// invoking session's keyring, and that keyring.
type keys struct {
	Serial int    `json:"serial"`
	Ring   int    `json:"ring"`
	Desc   string `json:"desc"`
}

// keyOps are the probe's keyring calls, each of which the jail refuses.
var keyOps = []string{"session", "read", "describe", "search", "request", "add", "add_host", "unlink", "clear",
	"revoke", "invalidate", "setperm", "link", "user", "persistent", "to_parent", "join"}

// withSessionKey gives the world's launch an invoking session keyring that
// holds a key only a possessor may see or read (keytest.Session: the
// goroutine that launches inherits it), and makes its payload a secret
// that no output or workspace file may show.
func withSessionKey(t *testing.T, w *world) {
	k := keytest.Session(t, hostUID(w.U))
	w.key = &k
	// Not a file: nothing for the default loot to open.
	w.secrets = append(w.secrets, secret{name: "the invoking session's key", path: fmt.Sprint("key ", k.Serial), value: k.Payload, rootOnly: true})
}

// hostUID is the uid a user's jail runs as on the host: root's is
// rootview.ID (root's remapped view).
func hostUID(u jailtest.RunAs) int {
	if u.UID == 0 {
		return rootview.ID
	}
	return u.UID
}

func (w *world) keyProbe() *keys {
	return &keys{Serial: w.key.Serial, Ring: w.key.Ring, Desc: w.key.Desc}
}

// TestSessionKeyring: the jail holds a session keyring of its own, empty,
// not the login's, and no keyring call reaches the kernel. A key in the
// invoking session's keyring is neither seen nor read, and after the
// session that keyring is as it was.
func TestSessionKeyring(t *testing.T) {
	runAttacks(t, []attack{{
		name:    "read, change and delete the invoking session's keys",
		prep:    withSessionKey,
		probe:   func(w *world, _ string) probe { return probe{Keys: w.keyProbe()} },
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			started(t, sess)
			for _, op := range keyOps {
				if got := sess.Report["keys:"+op]; got != "EPERM" {
					t.Errorf("in the jail, keyctl %s: %q, want EPERM (the filter's)", op, got)
				}
			}
			// /proc/keys needs no keyctl: it lists the keys the reader
			// possesses (those keys belong to the uid the jail runs as,
			// and are possessor-only). The invoking session's keyring and
			// key are not there.
			proc := sess.Report["keys:proc"]
			if !strings.HasPrefix(proc, "ok") {
				t.Errorf("the jail could not read /proc/keys: %q", proc)
			}
			for _, leak := range []string{w.key.Desc, fmt.Sprintf("%08x ", w.key.Ring), fmt.Sprintf("%08x ", w.key.Serial)} {
				if strings.Contains(proc, leak) {
					t.Errorf("LEAK: the jail's /proc/keys shows %q, of the invoking session's keyring:\n%s", leak, proc)
				}
			}
			w.key.Unchanged(t)
		},
	}})
}

// TestSessionKeyringProbeReaches: where the session keyring is inherited
// and no filter stands (the probe run by hand, and in a bare bwrap with a
// user namespace, as the jail's host uid), the same probe reads, adds and
// deletes the invoking session's keys, and /proc/keys shows them, so the
// class can fail.
func TestSessionKeyringProbeReaches(t *testing.T) {
	r := shared.Get(t)
	for _, u := range users {
		for _, how := range []string{"by hand", "bare bwrap"} {
			t.Run(u.Name+"/"+how, func(t *testing.T) {
				w := newWorld(t, u)
				withSessionKey(t, w)
				dir := filepath.Join(w.Base, "unjailed")
				if err := os.Mkdir(dir, 0o777); err != nil {
					t.Fatal(err)
				}
				args := []string{"probe", probe{Keys: w.keyProbe()}.arg()}
				c := w.Host(dir, r.Agent, args...)
				if how == "bare bwrap" {
					c = w.Host(dir, "bwrap", append([]string{"--unshare-user", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
						"--bind", dir, dir, "--", r.Agent}, args...)...)
					c.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(hostUID(u)), Gid: uint32(hostUID(u))}
				}
				res := jailtest.Run(t, c, 10*time.Second)
				if res.Code != 0 || res.Report == nil {
					t.Fatalf("the probe did not run: exit %d\n%s", res.Code, res.Stderr)
				}
				for op, want := range map[string]string{"read": "ok", "add": "ok", "unlink": "ok", "session": fmt.Sprint("ok ", w.key.Ring)} {
					if got := res.Report["keys:"+op]; got != want {
						t.Errorf("%s, keyctl %s: %q, want %q", how, op, got, want)
					}
				}
				if proc := res.Report["keys:proc"]; !strings.Contains(proc, w.key.Desc) || !strings.Contains(proc, fmt.Sprintf("%08x ", w.key.Ring)) {
					t.Errorf("%s, /proc/keys does not show the invoking session's keyring and key: %q", how, proc)
				}
			})
		}
	}
}
