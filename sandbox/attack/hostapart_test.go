package attack

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"testing"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/internal/testenv"
)

// The classes where host and jail must stay apart beyond the workspace:
// the host's wiring in /sys, other users (their homes, their sockets), the
// paths a site hides, and the files host tools read on their own.

// TestSysShowsNoHostWiring: /sys lists no host interface and no host
// cgroup; what programs size themselves by still answers as on the host
// (nproc, Node's CPU count and the memory limit it reads from the cgroup).
func TestSysShowsNoHostWiring(t *testing.T) {
	nodeMem := func() string {
		out, _ := exec.Command("node", "-p", "process.constrainedMemory ? process.constrainedMemory() : 0").Output()
		return strings.TrimSpace(string(out))
	}
	host := map[string]string{"nproc": strconv.Itoa(runtime.NumCPU()), "node_mem": nodeMem()}
	runAttacks(t, []attack{{
		name: "read the host's interfaces and cgroups from /sys",
		probe: func(w *world, _ string) probe {
			return probe{Steps: steps(
				"net", "ls -A /sys/class/net /sys/devices/virtual/net 2>/dev/null | grep -v '^/' | grep -v '^$' | tr '\\n' ' '",
				"cgroup", "find /sys/fs/cgroup -maxdepth 3 -type d 2>/dev/null | wc -l",
				"nproc", "nproc",
				"node_cpus", "node -p 'require(\"os\").cpus().length'",
				"node_mem", "node -p 'process.constrainedMemory ? process.constrainedMemory() : 0'",
			)}
		},
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			started(t, sess)
			out := func(n string) string {
				v := sess.Report["sh:"+n]
				if _, rest, ok := strings.Cut(v, ": "); ok {
					return strings.TrimSpace(rest)
				}
				return v
			}
			if got := out("net"); got != "" {
				t.Errorf("LEAK: /sys lists the host's interfaces in the jail: %q", got)
			}
			if n, _ := strconv.Atoi(out("cgroup")); n > 8 {
				t.Errorf("LEAK: /sys/fs/cgroup shows %d directories in the jail: the host's tree", n)
			}
			if got := out("nproc"); got != host["nproc"] {
				t.Errorf("nproc in the jail = %q, want the host's %s", got, host["nproc"])
			}
			if got := out("node_cpus"); got != host["nproc"] {
				t.Errorf("Node's os.cpus() in the jail = %q, want %s", got, host["nproc"])
			}
			if got := out("node_mem"); got != host["node_mem"] {
				t.Errorf("Node's cgroup memory limit in the jail = %q, want the host's %q", got, host["node_mem"])
			}
		},
	}})
}

// otherUser makes an account with a login shell and a home of its own,
// holding a secret, removed when the test ends.
func otherUser(t *testing.T) (home, secret string) {
	t.Helper()
	base := t.TempDir()
	home = filepath.Join(jailtest.WorldBase, "other-"+filepath.Base(base))
	name := "cco-attack-" + strconv.Itoa(os.Getpid()%100000)
	if out, err := exec.Command("useradd", "-M", "-d", home, "-s", "/bin/bash", "-u", strconv.Itoa(60000+os.Getpid()%4000), name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run(); os.RemoveAll(home) })
	secret = filepath.Join(home, "project", "secret.txt")
	os.MkdirAll(filepath.Dir(secret), 0o755)
	os.WriteFile(secret, []byte("CCO-OTHER-USERS-SECRET"), 0o644)
	os.Chmod(home, 0o755) // readable by all: only the jail hides it
	return home, secret
}

// TestOtherUsersAndHiddenPaths: another user's home, world-readable on the
// host, and a path sandbox.toml's hide names, are not visible in the jail.
func TestOtherUsersAndHiddenPaths(t *testing.T) {
	testenv.RequireRoot(t)
	home, secret := otherUser(t)
	hidden := filepath.Join(jailtest.WorldBase, "hidden-"+strconv.Itoa(os.Getpid()))
	os.MkdirAll(hidden, 0o755)
	os.WriteFile(filepath.Join(hidden, "key"), []byte("CCO-HIDDEN-SECRET"), 0o644)
	t.Cleanup(func() { os.RemoveAll(hidden) })
	runAttacks(t, []attack{{
		name:   "read another user's home and a hidden path",
		config: func(*world) string { return fmt.Sprintf("hide = [%q]\n", hidden) },
		probe: func(w *world, _ string) probe {
			return probe{Steps: steps("other_cat", "cat "+secret+" 2>/dev/null", "other_ls", "ls -A "+home+" 2>/dev/null",
				"hidden_cat", "cat "+hidden+"/key 2>/dev/null", "hidden_ls", "ls -A "+hidden+" 2>/dev/null")}
		},
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			started(t, sess)
			for _, k := range []string{"sh:other_cat", "sh:hidden_cat", "sh:other_ls", "sh:hidden_ls"} {
				v := sess.Report[k]
				_, out, _ := strings.Cut(v, ": ")
				if v == "" || strings.Contains(v, "SECRET") || strings.HasSuffix(k, "_ls") && strings.TrimSpace(out) != "" {
					t.Errorf("LEAK: %s in the jail: %q", k, v)
				}
			}
		},
	}})
}

// TestForeignSocketsNeitherFailNorSlow: thousands of sockets another user
// holds in a world-writable directory do not fail a launch, are not
// connectable from the jail, and cost one mount, not one each.
func TestForeignSocketsNeitherFailNorSlow(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.HostSockets(t)
	dir := filepath.Join(jailtest.WorldBase, "ww-"+strconv.Itoa(os.Getpid()))
	os.MkdirAll(dir, 0o755)
	os.Chmod(dir, 0o1777)
	t.Cleanup(func() { os.RemoveAll(dir) })
	const n = 3000
	var first string
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("s%d.sock", i))
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		os.Chown(p, 60001, 60001)
		if i == 0 {
			first = p
		}
	}
	runAttacks(t, []attack{{
		name:    "another user's sockets by the thousand",
		serial:  true,
		probe:   func(w *world, _ string) probe { return probe{Connect: []string{first}} },
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			started(t, sess)
			if got := sess.Report["connect:"+first]; got == "ok" {
				t.Errorf("LEAK: %s connected from the jail", first)
			}
			if strings.Count(sess.Stderr, dir) > 0 {
				t.Errorf("the launch spoke of the sockets: %s", sess.Stderr)
			}
		},
	}})
}

// TestSourcedFilesReported: an .envrc.local that the user's .envrc
// sources, planted by a session, is reported after it, with the line
// direnv runs, though it is gitignored. (The other files host tools load
// on their own: TestHostLoadedFilesReported.)
func TestSourcedFilesReported(t *testing.T) {
	plantedAndReported(t, "plant files host tools source without asking",
		[]string{".envrc.local"},
		func(w *world) {
			os.WriteFile(filepath.Join(w.ws, ".envrc"), []byte("source_env_if_exists .envrc.local\n"), 0o644)
			os.WriteFile(filepath.Join(w.ws, ".gitignore"), []byte(".envrc.local\n.env\n"), 0o644)
		},
		func(w *world) string { return w.touch("sourced") }, "direnv runs it in your shell when an .envrc sources it: touch ")
}

// TestAgentConfigInSubdirectoriesReported: an agent's project config that
// a session plants in a subdirectory of the workspace (where that agent,
// started there, loads it: Claude Code's hooks in packages/web/.claude,
// OpenCode's plugins in packages/api/opencode.json) is reported after the
// session, one warning each: the jail protects the workspace's top only.
func TestAgentConfigInSubdirectoriesReported(t *testing.T) {
	plantedAndReported(t, "plant agent config in a subdirectory",
		[]string{"packages/web/.claude/settings.json", "packages/api/opencode.json"},
		func(w *world) {
			os.MkdirAll(filepath.Join(w.ws, "packages/web"), 0o755)
			os.MkdirAll(filepath.Join(w.ws, "packages/api"), 0o755)
		},
		func(w *world) string { return w.claudeHooks("subdir") }, "an agent's project config, created or changed in this session")
}

// plantedAndReported is the class where a session plants files the jail
// lets it write (names, workspace-relative, each holding payload) that a
// host tool or another agent would read later: each must be reported after
// the session with the warning that starts with want.
func plantedAndReported(t *testing.T, name string, names []string, prep func(w *world), payload func(w *world) string, want string) {
	runAttacks(t, []attack{{
		name: name,
		prep: func(t *testing.T, w *world) {
			prep(w)
			w.Own(t)
		},
		probe: func(w *world, _ string) probe {
			var b strings.Builder
			for _, n := range names {
				fmt.Fprintf(&b, "mkdir -p %q; printf %%s %s > %q\n", filepath.Dir(filepath.Join(w.ws, n)), shq(payload(w)), filepath.Join(w.ws, n))
			}
			return probe{Steps: steps("plant", b.String())}
		},
		verdict: func(w *world) verdict {
			var v verdict
			for _, n := range names {
				v.allowPlanted = append(v.allowPlanted, filepath.Join(w.ws, n))
			}
			return v
		},
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			started(t, sess)
			for _, n := range names {
				if !strings.Contains(sess.Stderr, filepath.Join(w.ws, n)+": "+want) {
					t.Errorf("no warning for %s after the session:\n%s", n, sess.Stderr)
				}
			}
		},
	}})
}

// cleanText fails for each byte of out a terminal would act on: ESC and
// every other byte below 0x20 but \n and \t, DEL, a C1 control (raw or as
// UTF-8).
func cleanText(t *testing.T, what, out string) {
	t.Helper()
	for i := 0; i < len(out); i++ {
		c := out[i]
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 && c <= 0x9f && (i == 0 || out[i-1] != 0xc2) ||
			c == 0xc2 && i+1 < len(out) && out[i+1] >= 0x80 && out[i+1] <= 0x9f {
			t.Errorf("LEAK: %s holds the byte %#x at %d: %q", what, c, i, out[max(0, i-20):min(len(out), i+20)])
			return
		}
	}
}

// TestShadowPrintsNoControlBytes: names, keys and file contents a session
// chose (a git config subsection with an OSC 52 clipboard write, a
// repository directory whose name sets the window title, C1 controls, a
// .git file's text) reach the user's terminal escaped: in the post-session
// audit and in the next launch's refusal.
func TestShadowPrintsNoControlBytes(t *testing.T) {
	runAttacks(t, []attack{{
		name: "print escape sequences through the shadow",
		probe: func(w *world, _ string) probe {
			return probe{Steps: steps("plant", `set -e
d="$(printf 'r\033]0;owned\007\302\233')"
mkdir -p "$d/.git/hooks"
printf '[core]\n\tbare = false\n[color "\033]52;c;ZXZpbA==\007\302\23331m"]\n\tui = always\n' > "$d/.git/config"
printf '#!/bin/sh\n' > "$d/.git/hooks/post-checkout"
mkdir -p w2
printf 'gitdir: \033]52;c;ZXZpbA==\007\n' > w2/.git
printf '\033[2J' > "$(printf '.envrc.\033[31m')"
echo DONE`)}
		},
		verdict: func(w *world) verdict {
			return verdict{noGit: true, allowPlanted: []string{w.ws}}
		},
		check: func(t *testing.T, w *world, name string, sess jailtest.Result) {
			started(t, sess)
			if !strings.Contains(sess.Stderr, `\x1b`) {
				t.Errorf("the audit did not report the planted names (escaped):\n%s", sess.Stderr)
			}
			cleanText(t, "the shadow's stderr after the session", sess.Stderr)
			second := w.launch(t, shared.Get(t), name, filepath.Join(w.ws, "w2"), probe{})
			if second.Code == 0 {
				t.Errorf("a launch where .git names nothing was not refused:\n%s", second.Stderr)
			}
			cleanText(t, "the next launch's refusal", second.Stderr)
		},
	}})
}

// TestHostTerminalOutOfReach: on the agent's own terminal (a pty of the
// jail's, relayed by the shadow), no process the jail can see holds the
// user's terminal (a host devpts device), and /dev/tty in the jail is not
// the user's. As root and as nobody, for every agent.
func TestHostTerminalOutOfReach(t *testing.T) {
	testenv.RequireRoot(t)
	r := shared.Get(t)
	for _, name := range agents {
		for _, u := range users {
			t.Run(name+"/"+u.Name, func(t *testing.T) {
				w := newWorld(t, u)
				master, slave := hostPty(t)
				os.Chown(slave.Name(), u.UID, u.GID)
				var st unix.Stat_t
				if err := unix.Fstat(int(slave.Fd()), &st); err != nil {
					t.Fatal(err)
				}
				p := probe{Steps: steps("ttys", `for f in /proc/[0-9]*/fd/*; do stat -L -c '%n %t %d' "$f" 2>/dev/null; done | awk '$2 ~ /^8[89a-f]$/ {print $1 "=" $3}' | tr '\n' ' '`,
					"devtty", `stat -L -c '%d' /dev/tty 2>&1`)}
				c := w.Cmd(r, name, w.ws, "probe", p.arg())
				c.Stdin, c.Stdout, c.Stderr = slave, slave, slave
				if c.SysProcAttr == nil {
					c.SysProcAttr = &syscall.SysProcAttr{}
				}
				c.SysProcAttr.Setsid, c.SysProcAttr.Setctty, c.SysProcAttr.Ctty, c.SysProcAttr.Setpgid = true, true, 0, false
				var out strings.Builder
				done := make(chan struct{})
				go func() {
					defer close(done)
					buf := make([]byte, 4096)
					for {
						n, err := master.Read(buf)
						out.Write(buf[:n])
						if err != nil {
							return
						}
					}
				}()
				release := testenv.Launching(t)
				err := c.Run()
				release()
				slave.Close()
				select {
				case <-done:
				case <-time.After(5 * time.Second):
				}
				text := strings.ReplaceAll(out.String(), "\r", "")
				if err != nil {
					t.Fatalf("session: %v\n%s", err, text)
				}
				host := "=" + strconv.FormatUint(st.Dev, 10)
				i := strings.Index(text, `"sh:ttys":`)
				if i < 0 {
					t.Fatalf("no report:\n%s", text)
				}
				if strings.Contains(text[i:], host+" ") || strings.Contains(text[i:], host+`"`) {
					t.Errorf("LEAK: a process the jail sees holds the user's terminal:\n%s", text)
				}
				if !strings.Contains(text[i:], "/fd/0=") {
					t.Errorf("the jail's own terminal was not seen, the scan proves nothing:\n%s", text)
				}
				if j := strings.Index(text, `"sh:devtty":"exit 0: `); j >= 0 && strings.HasPrefix(text[j+len(`"sh:devtty":"exit 0: `):], strconv.FormatUint(st.Dev, 10)+`"`) {
					t.Errorf("LEAK: /dev/tty in the jail is the user's terminal:\n%s", text)
				}
			})
		}
	}
}

// hostPty is a pty pair of the host's devpts: the user's terminal.
func hostPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}
