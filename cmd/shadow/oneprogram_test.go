package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox/engine"
)

// TestOneProgramBetweenLauncherAndAgent reads, on the host, the process
// tree of a running session: with cco's engine the launcher's one child is
// the jail's pid 1, the helper (its init on the plain path, its exec mode
// on a terminal and for a user's proxy endpoint), whose one child is the
// agent; every thread of that pid 1 holds no capability, not even in its
// bounding set, and runs with no_new_privs and seccomp. With bubblewrap
// (CCO_JAIL_ENGINE=bwrap) the tree is bwrap, the init, then the helper on
// a terminal, then the agent.
func TestOneProgramBetweenLauncherAndAgent(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	own := os.Getenv(engine.EnvVar) != string(engine.Bwrap)
	p, _ := agent.Lookup("claude")
	helper := filepath.Join(root, "usr/libexec/cco/sandbox-helper")
	vendor := filepath.Join(root, p.Binary)
	for _, tc := range []struct {
		name     string
		u        runAs
		terminal bool
	}{
		{"root", asRoot, false},
		// The helper's exec mode makes the proxy endpoint.
		{"user-egress", asNobody, false},
		{"root-pty", asRoot, true},
		{"user-pty", asNobody, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.u)
			tag := strings.ReplaceAll(tc.name, "-", "")
			c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "sleep", "tag": tag}))
			null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			c.Stdin, c.Stdout, c.Stderr = null, null, null
			if tc.terminal {
				m, s := openPty(t)
				go func() {
					buf := make([]byte, 4096)
					for {
						if _, err := m.Read(buf); err != nil {
							return
						}
					}
				}()
				os.Chown(s.Name(), tc.u.uid, tc.u.gid)
				c.Stdin, c.Stdout, c.Stderr = s, s, s
				if c.SysProcAttr == nil {
					c.SysProcAttr = &syscall.SysProcAttr{}
				}
				c.SysProcAttr.Setsid, c.SysProcAttr.Setctty, c.SysProcAttr.Ctty = true, true, 0
			}
			release := testenv.Launching(t)
			if err := c.Start(); err != nil {
				release()
				t.Fatal(err)
			}
			defer func() {
				c.Process.Signal(syscall.SIGTERM)
				done := make(chan struct{})
				go func() { c.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					c.Process.Kill()
					<-done
				}
				release()
			}()
			started := filepath.Join(w.ws, "started-"+tag)
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(started); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the agent never started")
				}
			}

			chain := []string{}
			want := []string{}
			pid := c.Process.Pid
			if !own {
				want = append(want, "/usr/bin/bwrap")
				pid = onlyChild(t, pid, "bwrap")
				chain = append(chain, exe(pid))
			}
			pid1 := onlyChild(t, pid, "the launcher")
			chain = append(chain, exe(pid1))
			want = append(want, helper)
			if !own && tc.terminal {
				// bwrap's jail: the init, then the helper, which stays the
				// agent's parent on a terminal (elsewhere it execs the
				// agent once the endpoint is made).
				h := onlyChild(t, pid1, "the init")
				chain, want = append(chain, exe(h)), append(want, helper)
				pid1 = h
			}
			a := onlyChild(t, pid1, "the jail's pid 1")
			chain, want = append(chain, exe(a)), append(want, vendor)
			if strings.Join(chain, " > ") != strings.Join(want, " > ") {
				t.Errorf("between the launcher and the agent: %s\nwant: %s", strings.Join(chain, " > "), strings.Join(want, " > "))
			}
			if !own {
				return
			}
			// Every thread of the jail's pid 1.
			tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid1))
			if err != nil || len(tasks) == 0 {
				t.Fatalf("the threads of pid 1 (%d): %v", pid1, err)
			}
			for _, f := range tasks {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, kv := range [][2]string{{"CapInh", "0000000000000000"}, {"CapPrm", "0000000000000000"}, {"CapEff", "0000000000000000"},
					{"CapBnd", "0000000000000000"}, {"CapAmb", "0000000000000000"}, {"NoNewPrivs", "1"}, {"Seccomp", "2"}} {
					if got := field(string(b), kv[0]); got != kv[1] {
						t.Errorf("%s: %s %s, want %s", f, kv[0], got, kv[1])
					}
				}
			}
		})
	}
}

// onlyChild is pid's one child on the host; what names pid in a failure.
// The launcher's egress proxy, which runs on the host beside the jail, is
// not counted.
func onlyChild(t *testing.T, pid int, what string) int {
	t.Helper()
	var kids []string
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, k := range strings.Fields(string(b)) {
			if n, _ := strconv.Atoi(k); filepath.Base(exe(n)) != "egress-proxy" {
				kids = append(kids, k)
			}
		}
	}
	if len(kids) != 1 {
		var exes []string
		for _, k := range kids {
			n, _ := strconv.Atoi(k)
			exes = append(exes, k+"="+exe(n))
		}
		t.Fatalf("%s (pid %d) has %d children, want one: %v", what, pid, len(kids), exes)
	}
	n, _ := strconv.Atoi(kids[0])
	return n
}

// exe is the program pid runs.
func exe(pid int) string {
	p, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return "?"
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

func field(status, key string) string {
	for _, l := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestJailEndsWithTheLauncher: a launcher killed with SIGKILL takes its
// jail with it (bwrap's --die-with-parent; cco's engine: the child's
// parent-death signal, which its exec into pid 1 keeps): within seconds no
// process of the jail is left on the host. As root and as a user on a
// terminal, where the helper is pid 1.
func TestJailEndsWithTheLauncher(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	for _, tc := range []struct {
		name     string
		u        runAs
		terminal bool
	}{{"root", asRoot, false}, {"user-pty", asNobody, true}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.u)
			c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "sleep", "tag": "orphaned"}))
			null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			c.Stdin, c.Stdout, c.Stderr = null, null, null
			if tc.terminal {
				m, s := openPty(t)
				go func() {
					buf := make([]byte, 4096)
					for {
						if _, err := m.Read(buf); err != nil {
							return
						}
					}
				}()
				os.Chown(s.Name(), tc.u.uid, tc.u.gid)
				c.Stdin, c.Stdout, c.Stderr = s, s, s
				if c.SysProcAttr == nil {
					c.SysProcAttr = &syscall.SysProcAttr{}
				}
				c.SysProcAttr.Setsid, c.SysProcAttr.Setctty, c.SysProcAttr.Ctty = true, true, 0
			}
			defer testenv.Launching(t)()
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			started := filepath.Join(w.ws, "started-orphaned")
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(started); err == nil {
					break
				}
				if time.Now().After(deadline) {
					c.Process.Kill()
					c.Wait()
					t.Fatal("the agent never started")
				}
			}
			// The jail's processes on the host: every descendant of the
			// launcher but its egress proxy.
			var jail []int
			var walk func(pid int)
			walk = func(pid int) {
				tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
				for _, f := range tasks {
					b, _ := os.ReadFile(f)
					for _, k := range strings.Fields(string(b)) {
						n, _ := strconv.Atoi(k)
						if filepath.Base(exe(n)) != "egress-proxy" {
							jail = append(jail, n)
							walk(n)
						}
					}
				}
			}
			walk(c.Process.Pid)
			if len(jail) < 2 {
				t.Fatalf("the jail's processes %v: want its pid 1 and the agent at least", jail)
			}
			c.Process.Kill()
			c.Wait()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				var left []string
				for _, p := range jail {
					if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); err == nil && !strings.Contains(string(b), ") Z ") {
						left = append(left, fmt.Sprintf("%d=%s", p, exe(p)))
					}
				}
				if len(left) == 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("10 s after the launcher was killed, the jail's processes %v still run", left)
				}
			}
		})
	}
}
