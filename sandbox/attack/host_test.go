package attack

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	agentpkg "github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox"
)

// hostSockets binds a unix socket in each directory (made for the test
// where given as a tree: /var/lib, /srv, /var/spool), everyone may connect.
func hostSockets(t *testing.T, w *world) []string {
	t.Helper()
	// Launches of other test binaries must not meet them half made.
	testenv.HostSockets(t)
	var out []string
	for _, d := range []string{"/var/lib", "/srv", "/var/spool", ""} {
		dir := w.Base // the workspace's parent
		if d != "" {
			var err error
			if dir, err = os.MkdirTemp(d, "cco-attack-sock-"); err != nil {
				t.Fatal(err)
			}
			os.Chmod(dir, 0o755)
			t.Cleanup(func() { os.RemoveAll(dir) })
		}
		p := filepath.Join(dir, "host.sock")
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		os.Chmod(p, 0o777)
		out = append(out, p)
	}
	return out
}

// TestHostSockets: no host unix socket connects from the jail but the
// egress proxy's, wherever the jail's view of the host shows one.
func TestHostSockets(t *testing.T) {
	runAttacks(t, []attack{{
		name:   "connect to host sockets in /var/lib, /srv, /var/spool and the workspace's parent",
		serial: true,
		prep:   func(t *testing.T, w *world) { w.socks = hostSockets(t, w) },
		probe: func(w *world, _ string) probe {
			return probe{Connect: append(append([]string{}, w.socks...), sandbox.EgressSocket)}
		},
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			started(t, sess)
			for _, s := range w.socks {
				if got := sess.Report["connect:"+s]; got == "ok" {
					t.Errorf("LEAK: the host socket %s connected from the jail", s)
				}
			}
			if got := sess.Report["connect:"+sandbox.EgressSocket]; got != "ok" {
				t.Errorf("the egress proxy's socket %s: %s, want it to connect", sandbox.EgressSocket, got)
			}
		},
	}})
}

// TestSetuid: no call sets S_ISUID or S_ISGID on a file in a session.
func TestSetuid(t *testing.T) {
	calls := []string{"chmod", "fchmod", "fchmodat", "fchmodat2", "open", "openat", "openat2", "creat", "mknod", "chmod-dir", "mkdir"}
	runAttacks(t, []attack{{
		name:    "set setuid and setgid bits by every call",
		probe:   func(w *world, _ string) probe { return probe{Suid: w.ws + "/suid"} },
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			started(t, sess)
			for _, c := range calls {
				got := sess.Report["suid:"+c]
				p := filepath.Join(w.ws, "suid", c)
				if c == "chmod-dir" {
					p = filepath.Join(w.ws, "suid", "setgid-dir")
				}
				fi, err := os.Lstat(p)
				if err == nil && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
					t.Errorf("LEAK: %s set a setuid or setgid bit: %s on the host is %v (the call said %s)", c, p, fi.Mode(), got)
				}
				ok := got == "EPERM" || c == "openat2" && got == "ENOSYS" ||
					c == "mkdir" && got == "ok" && err == nil && fi.Mode()&fs.ModeSetgid == 0 // mkdir drops S_ISGID itself
				if !ok {
					t.Errorf("%s with a setuid or setgid mode: %s, want EPERM", c, got)
				}
			}
		},
	}})
}

// TestRootOnlySecrets: a root session reads no file or directory only
// root can read (outside its own login state, the workspace and the
// vendor tree).
func TestRootOnlySecrets(t *testing.T) {
	runAttacks(t, []attack{{
		name: "read, copy and hard-link root-only files",
		only: rootOnly,
		probe: func(w *world, _ string) probe {
			var p probe
			for _, s := range fixture.rootOnly {
				p.Loot = append(p.Loot, s.path)
				p.Steps = append(p.Steps, step{"cat " + s.path, "cat " + shq(s.path)},
					step{"ln " + s.path, "ln " + shq(s.path) + " ./hardlink-" + filepath.Base(s.path) + " && cat ./hardlink-" + filepath.Base(s.path)})
			}
			dir := filepath.Dir(fixture.rootOnly[1].path)
			p.Steps = append(p.Steps, step{"cp -r " + dir, "cp -r " + shq(dir) + " ./stolen && ls -la ./stolen"})
			for _, s := range w.secrets {
				if !s.rootOnly {
					p.Loot = append(p.Loot, s.path)
				}
			}
			return p
		},
		verdict: func(w *world) verdict {
			// The second launch tries them too.
			var l []string
			for _, s := range fixture.rootOnly {
				l = append(l, s.path)
			}
			return verdict{noGit: true, secondLoot: l}
		},
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			started(t, sess)
			for _, s := range fixture.rootOnly {
				if strings.HasPrefix(sess.Report["loot:"+s.path], "read ") {
					t.Errorf("LEAK: root's jail read the %s %s", s.name, s.path)
				}
			}
		},
	}})
}

// scratchLimit and procLimit are the bounds the scratch class sets.
const (
	scratchLimit = 32 << 20
	procLimit    = 128
)

// TestScratchBounded: every writable tmpfs has a size, and processes are
// bounded.
func TestScratchBounded(t *testing.T) {
	runAttacks(t, []attack{{
		name:       "fill the writable tmpfs and fork without end",
		everyAgent: true,
		// With caches = "session" ~/.cache is a tmpfs too; "persist"
		// keeps it on disk, in the agent's tree, as the workspace is.
		config: func(*world) string {
			return fmt.Sprintf("tmpfs_size = %d\nmax_procs = %d\ncaches = \"session\"\n", scratchLimit, procLimit)
		},
		probe: func(w *world, agent string) probe {
			p := probe{Fill: []string{"/tmp", "/run", "/dev/shm", "/var/tmp", "/dev", w.Home, w.Home + "/.cache"}, FillMax: 4 * scratchLimit, Fork: 3 * procLimit}
			// The profile's masks are writable tmpfs too.
			prof, _ := agentpkg.Lookup(agent)
			for _, m := range prof.Masks {
				p.Fill = append(p.Fill, w.Home+"/"+m)
			}
			return p
		},
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, agent string, sess jailtest.Result) {
			started(t, sess)
			for k, v := range sess.Report {
				d, ok := strings.CutPrefix(k, "fill:")
				if !ok {
					continue
				}
				n, res, _ := strings.Cut(v, " ")
				written, _ := strconv.ParseInt(n, 10, 64)
				switch {
				case res == "ok":
					t.Errorf("LEAK: %d MiB written to %s with tmpfs_size %d MiB: it is unbounded", written>>20, d, scratchLimit>>20)
				case res == "ENOSPC" && written > scratchLimit:
					t.Errorf("%d MiB written to %s before ENOSPC, more than tmpfs_size %d MiB", written>>20, d, scratchLimit>>20)
				case res != "ENOSPC" && written > 0:
					t.Errorf("writing %s stopped at %d MiB with %s, want ENOSPC", d, written>>20, res)
				}
			}
			n, res, _ := strings.Cut(sess.Report["fork"], " ")
			if res == "ok" {
				t.Errorf("LEAK: %s processes started with max_procs %d: the fork loop is unbounded", n, procLimit)
			} else if res != "EAGAIN" {
				t.Errorf("the fork loop stopped at %s processes with %s, want EAGAIN", n, res)
			}
		},
	}})
}

// TestForgeDirs: a forge CLI's settings that it runs on the host stay
// read-only when its token directory is bound in.
func TestForgeDirs(t *testing.T) {
	forges := map[string]string{"gh": ".config/gh", "glab": ".config/glab-cli"}
	runAttacks(t, []attack{{
		name:   "rewrite gh and glab config.yml with forge = [\"github\", \"gitlab\"]",
		config: func(*world) string { return "forge = [\"github\", \"gitlab\"]\n" },
		prep: func(t *testing.T, w *world) {
			// The token directories are bound in on purpose: their tokens
			// are meant for the jail.
			var keep []secret
			for _, s := range w.secrets {
				if s.name != "gh" {
					keep = append(keep, s)
				}
			}
			w.secrets = keep
		},
		probe: func(w *world, _ string) probe {
			var p probe
			for cli, dir := range forges {
				cfg := w.Home + "/" + dir + "/config.yml"
				evil := shq("pager: " + w.touch(cli+"-pager") + "\neditor: " + w.touch(cli+"-editor") + "\naliases:\n  co: '!" + w.touch(cli+"-alias") + "'\n")
				p.Steps = append(p.Steps,
					step{cli + " append", "printf '%s' " + evil + " >> " + shq(cfg) + " && echo DONE"},
					step{cli + " replace", "printf '%s' " + evil + " > " + shq(cfg+".new") + " && mv -f " + shq(cfg+".new") + " " + shq(cfg) + " && echo DONE"},
					step{cli + " unlink", "rm -f " + shq(cfg) + " && printf '%s' " + evil + " > " + shq(cfg) + " && echo DONE"},
					step{cli + " rename dir", "mv " + shq(w.Home+"/"+dir) + " " + shq(w.Home+"/"+dir+"-aside") + " && echo DONE"})
			}
			return p
		},
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			started(t, sess)
			for cli, dir := range forges {
				notDone(t, sess, map[string]string{cli + " append": "appending to ~/" + dir + "/config.yml",
					cli + " replace": "renaming a file over ~/" + dir + "/config.yml", cli + " unlink": "recreating ~/" + dir + "/config.yml",
					cli + " rename dir": "renaming ~/" + dir})
				if b, err := os.ReadFile(filepath.Join(w.Home, dir, "config.yml")); err != nil || string(b) != "git_protocol: https\n" {
					t.Errorf("LEAK: ~/%s/config.yml on the host changed: %q %v", dir, b, err)
				}
			}
		},
	}})
}

// TestNestedLaunch: the agent's own name, run inside the jail, starts the
// agent there, for root and for users.
func TestNestedLaunch(t *testing.T) {
	r := shared.Get(t)
	runAttacks(t, []attack{{
		name:       "run the agent again inside the jail",
		everyAgent: true,
		// An installed host has a sandbox.toml, owned by root: inside a
		// user's jail root is the overflow uid.
		config:  func(*world) string { return sandbox.DefaultConfigTOML },
		probe:   func(w *world, agent string) probe { return probe{Nested: r.Shadow(agent)} },
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			started(t, sess)
			if got := sess.Report["nested"]; got != "exit 7" {
				t.Errorf("the nested launch: %s, want the agent's own exit 7\nits stderr: %s", got, sess.Report["nested_stderr"])
			}
			if strings.Contains(sess.Report["nested_stderr"], "chown") {
				t.Errorf("the nested launch suggests a chown:\n%s", sess.Report["nested_stderr"])
			}
		},
	}})
}

// TestRefusedWorkspaces: shared scratch and runtime trees, their
// ancestors, the tops of shared trees, the home's toolchain trees and
// dependency caches' places are no workspace: exit 126, one
// line naming the path and the fix, and nothing written. In the home or an
// ancestor of it the agent starts with no workspace: it runs, in an empty
// private directory, and nothing it writes reaches the host.
func TestRefusedWorkspaces(t *testing.T) {
	root := shared.Get(t)
	for _, agent := range agents {
		for _, u := range users {
			t.Run(agent+"/"+u.Name, func(t *testing.T) {
				w := newWorld(t, u)
				mk := func(parent string) string {
					d, err := os.MkdirTemp(parent, "cco-attack-ws-")
					if err != nil {
						t.Fatal(err)
					}
					os.Chown(d, u.UID, u.GID)
					t.Cleanup(func() { os.RemoveAll(d) })
					return d
				}
				cases := map[string]string{
					"below /tmp": mk("/tmp"), "below /var/tmp": mk("/var/tmp"), "below /run": mk("/run"), "below /dev/shm": mk("/dev/shm"),
					"/srv itself": "/srv",
				}
				for what, dir := range map[string]string{"the home": w.Home, "an ancestor of the home": w.Base} {
					t.Run(what, func(t *testing.T) {
						res := w.launch(t, root, agent, dir, probe{Steps: steps("write", "echo planted > planted-by-probe; echo planted > "+w.Home+"/planted-by-probe; pwd")})
						if res.Code != 0 || strings.Count(res.Stderr, "\n") != 1 || !strings.Contains(res.Stderr, "no workspace") {
							t.Errorf("launch in %s: exit %d, want 0 and one line saying there is no workspace:\n%s", dir, res.Code, res.Stderr)
						}
						if !strings.Contains(res.Stdout, sandbox.NoWorkspaceDir) {
							t.Errorf("launch in %s: the agent did not start in %s: %s", dir, sandbox.NoWorkspaceDir, res.Stdout)
						}
						for _, d := range []string{dir, w.Home} {
							if _, err := os.Lstat(filepath.Join(d, "planted-by-probe")); err == nil {
								t.Errorf("LEAK: a launch with no workspace wrote in %s", d)
							}
						}
					})
				}
				// A toolchain tree the jail binds read-only (~/.nvm), a tree
				// that holds a cache's place (~/go holds ~/go/pkg/mod) and a
				// cache's place itself: the host's own, never the session's.
				for _, rel := range []string{".nvm/versions", "go", ".npm/_cacache"} {
					for d := filepath.Join(w.Home, rel); d != w.Home; d = filepath.Dir(d) {
						if err := os.MkdirAll(d, 0o755); err != nil {
							t.Fatal(err)
						}
						os.Chown(d, u.UID, u.GID)
					}
				}
				cases["a toolchain tree (~/.nvm)"] = filepath.Join(w.Home, ".nvm")
				cases["in a toolchain tree (~/.nvm/versions)"] = filepath.Join(w.Home, ".nvm/versions")
				cases["over the module cache's place (~/go)"] = filepath.Join(w.Home, "go")
				cases["in npm's cache (~/.npm/_cacache)"] = filepath.Join(w.Home, ".npm/_cacache")
				// XDG_RUNTIME_DIR names the user's runtime tree wherever it is.
				xdg := mk(jailtest.WorldBase)
				cases["below $XDG_RUNTIME_DIR"] = mk(xdg)
				for what, dir := range cases {
					t.Run(what, func(t *testing.T) {
						before := listing(dir)
						c := w.Cmd(root, agent, dir, "probe", probe{Steps: steps("write", "echo planted > planted-by-probe")}.arg())
						for i, kv := range c.Env {
							if strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
								c.Env[i] = "XDG_RUNTIME_DIR=" + xdg
							}
						}
						release := testenv.Launching(t)
						res := jailtest.Run(t, c, launchTimeout)
						release()
						line := strings.TrimSpace(res.Stderr)
						if res.Code != 126 || strings.Contains(line, "\n") || !strings.Contains(line, dir) || !strings.Contains(line, "fix") {
							t.Errorf("launch in %s: exit %d, want 126 and one line naming it and the fix:\n%s", dir, res.Code, res.Stderr)
						}
						if res.Stdout != "" {
							t.Errorf("LEAK: the agent ran in %s: %s", dir, res.Stdout)
						}
						if after := listing(dir); after != before {
							t.Errorf("LEAK: the refused launch wrote in %s: %s, then %s", dir, before, after)
						}
					})
				}
			})
		}
	}
}

// TestRefusedAllowWrite: the same trees are refused as allow_write.
func TestRefusedAllowWrite(t *testing.T) {
	root := shared.Get(t)
	w := newWorld(t, jailtest.AsNobody)
	for _, dir := range []string{"/tmp", "/var/tmp/cco-attack-aw", "/run/cco-attack-aw", "/dev/shm"} {
		t.Run(dir, func(t *testing.T) {
			root.WithConfig(t, fmt.Sprintf("allow_write = [%q]\n", dir))
			res := w.launch(t, root, "claude", w.ws, probe{Steps: steps("write", "echo planted > planted-by-probe")})
			if res.Code != 126 || !strings.Contains(res.Stderr, dir) || !strings.Contains(res.Stderr, "allow_write") {
				t.Errorf("allow_write = [%q]: exit %d, want 126 naming it and allow_write:\n%s", dir, res.Code, res.Stderr)
			}
			if res.Stdout != "" {
				t.Errorf("LEAK: the agent ran with allow_write = [%q]: %s", dir, res.Stdout)
			}
		})
	}
}

// listing names a directory's entries.
func listing(dir string) string {
	ents, _ := os.ReadDir(dir)
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return strings.Join(n, ",")
}

// TestHostSocketChurn: host sockets that come and go while a launch starts
// (any local user can make them, in /var/lib or /tmp) neither break the
// launch nor show in the jail.
func TestHostSocketChurn(t *testing.T) {
	root := shared.Get(t)
	testenv.HostSockets(t)
	dir, err := os.MkdirTemp("/var/lib", "cco-attack-churn-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := filepath.Join(dir, fmt.Sprintf("s%d.sock", i%8))
			if l, err := net.Listen("unix", p); err == nil {
				l.Close() // removes the file: a socket that was there a moment ago
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for _, agent := range agents {
		for _, u := range users {
			t.Run(agent+"/"+u.Name, func(t *testing.T) {
				w := newWorld(t, u)
				for i := 0; i < 3; i++ {
					res := w.launch(t, root, agent, w.ws, probe{Mode: "exit"})
					if res.Code != 0 {
						t.Errorf("launch %d beside sockets that come and go in %s: exit %d\nstderr %s", i, dir, res.Code, res.Stderr)
					}
				}
			})
		}
	}
}
