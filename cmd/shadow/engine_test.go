package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox/engine"
)

// TestEngineDifferential runs one probe in a jail built by each engine,
// bubblewrap and cco's own, from the same launch, and compares what each
// jail shows: its mounts (normalised from /proc/self/mountinfo), its
// environment, its credentials, capabilities, no_new_privs and seccomp
// status, what it may do to the jail's other processes, and every answer
// of the jail battery (the probe of TestJailProperties). The verdict is
// taken on the host, from the two reports.
func TestEngineDifferential(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	for _, u := range []runAs{asRoot, asNobody} {
		for _, name := range []string{"claude", "codex"} {
			t.Run(name+"/"+u.name, func(t *testing.T) { engineDifferential(t, root, name, u) })
		}
	}
}

func engineDifferential(t *testing.T, root, name string, u runAs) {
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	tmpSock := filepath.Join(os.TempDir(), "cco-host-"+tag+".sock")
	for _, s := range []string{tmpSock} {
		l, err := net.Listen("unix", s)
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(s, 0o777)
		defer l.Close()
	}
	run := func(kind engine.Kind, mode string) map[string]string {
		t.Helper()
		w := newWorld(t, u)
		c := w.cmd(root, name, w.ws, "probe", params(map[string]any{"mode": mode,
			"root": root, "host_pid": os.Getpid(), "socks": []string{tmpSock}, "suid": root + "/bin/suid-id", "tag": tag}))
		c.Env = append(c.Env, engine.EnvVar+"="+string(kind))
		r := runCmd(t, c)
		if r.code != 0 || r.report == nil {
			t.Fatalf("%s: exit %d\nstdout %s\nstderr %s", kind, r.code, r.stdout, r.stderr)
		}
		out := map[string]string{}
		for k, v := range r.report {
			out[k] = normalise(v, w.base)
		}
		if m, ok := out["mounts"]; ok {
			out["mounts"] = visible(m)
		}
		os.RemoveAll(w.base)
		return out
	}
	for _, mode := range []string{"view", "probe"} {
		bw, own := run(engine.Bwrap, mode), run(engine.CCO, mode)
		for k, want := range map[string]string{"bwrap": bw["marker"], "cco": own["marker"]} {
			var m struct {
				Engine string
				Layers []string
			}
			if err := json.Unmarshal([]byte(want), &m); err != nil || m.Engine != k {
				t.Errorf("the %s jail's marker says engine %q (%v): %s", k, m.Engine, err, want)
			}
			// Landlock is cco's engine's second layer, where the kernel
			// has it.
			layers := "seccomp"
			if l := engine.Layer(engine.LandlockABI()); k == "cco" && l != "" {
				layers += " " + l
			}
			if strings.Join(m.Layers, " ") != layers {
				t.Errorf("the %s jail's marker says layers %q, want %q", k, m.Layers, layers)
			}
		}
		// The marker differs by its session, engine and layers alone.
		bw["marker"], own["marker"] = markerRest(bw["marker"]), markerRest(own["marker"])
		// The agent's pid: the engine's init is a Go program whose threads
		// take pids of the jail's namespace; the agent is never pid 1.
		for _, rep := range []map[string]string{bw, own} {
			if n, err := strconv.Atoi(rep["pid"]); err != nil || n < 2 {
				t.Errorf("the agent's pid in the jail is %q", rep["pid"])
			}
			delete(rep, "pid")
		}
		if mode == "view" {
			// cco's engine covers /proc's settings and triggers
			// read-only; bwrap 0.8 covers only what it finds writable,
			// which in a user namespace is none of them.
			var kept []string
			for _, l := range strings.Split(own["mounts"], "\n") {
				if strings.HasPrefix(l, "/proc/") {
					if !strings.Contains(l, " ro") && !strings.Contains(l, ",ro") {
						t.Errorf("cco's /proc cover is not read-only: %s", l)
					}
					continue
				}
				kept = append(kept, l)
			}
			if len(kept) == len(strings.Split(own["mounts"], "\n")) {
				t.Errorf("cco's jail has no /proc covers:\n%s", own["mounts"])
			}
			own["mounts"] = strings.Join(kept, "\n")
			// Every other process of cco's jail (its init, the helper)
			// is non-dumpable: no ptrace, no /proc/PID/environ. bwrap's
			// pid 1 is compared by its own tests (sandbox-helper's and
			// bwrap's dumpability is issue 33's item 4 on that engine).
			if own["others"] == "" {
				t.Error("cco's jail shows no other process")
			}
			for _, l := range strings.Split(own["others"], "\n") {
				if strings.Contains(l, "=ok") {
					t.Errorf("a cco process in the jail is reachable: %s", l)
				}
			}
			delete(bw, "others")
			delete(own, "others")
		}
		keys := map[string]bool{}
		for k := range bw {
			keys[k] = true
		}
		for k := range own {
			keys[k] = true
		}
		var sorted []string
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if bw[k] != own[k] {
				t.Errorf("%s %s differs:\nbwrap: %s\ncco:   %s\n%s", mode, k, bw[k], own[k], lineDiff(bw[k], own[k]))
			}
		}
		if mode == "view" {
			// The comparison is of jails that hold: each shows a
			// read-only root, no capability, no_new_privs and seccomp.
			for _, rep := range []map[string]string{bw, own} {
				if rep["status_CapEff"] != "0000000000000000" || rep["status_CapBnd"] != "0000000000000000" ||
					rep["status_NoNewPrivs"] != "1" || rep["status_Seccomp"] != "2" || rep["new_userns"] == "ok" ||
					!strings.Contains(rep["mounts"], "\n/ ") && !strings.HasPrefix(rep["mounts"], "/ ") {
					t.Errorf("a jail does not hold: %v", rep)
				}
			}
		}
	}
}

var sessionField = regexp.MustCompile(`"(session|engine)":"[^"]*",?|,?"layers":\[[^]]*\]`)

func markerRest(m string) string { return sessionField.ReplaceAllString(m, "") }

// normalise takes out of a report's value what differs between two launches
// on one engine: the world's own directory
// and the egress proxy's per-launch socket name.
func normalise(v, base string) string {
	return proxySocket.ReplaceAllString(strings.ReplaceAll(v, base, "<world>"), "<proxy socket>")
}

var proxySocket = regexp.MustCompile(`/tmp/cco-[0-9]+/[0-9]+-[0-9a-f]+\.sock`)

// visible keeps the mounts the jail can see: one that a later mount covers
// (at its own point or above it) is left out. Hidden host mounts differ by
// engine: bwrap 0.8 remounts read-only only what it walks to, cco's engine
// makes the whole tree read-only at once.
func visible(mounts string) string {
	lines := strings.Split(mounts, "\n")
	var out []string
	for i, l := range lines {
		p, _, _ := strings.Cut(l, " ")
		if strings.HasPrefix(p, "/var/lib/cco-test/") {
			// Another test's world, running meanwhile: the masks of its
			// host sockets come and go between the two launches.
			continue
		}
		covered := false
		for _, later := range lines[i+1:] {
			q, _, _ := strings.Cut(later, " ")
			if q == p || q == "/" || strings.HasPrefix(p, q+"/") {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// lineDiff names the lines only one side has.
func lineDiff(a, b string) string {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var out []string
	for l, n := range count {
		switch {
		case n > 0:
			out = append(out, "only bwrap: "+l)
		case n < 0:
			out = append(out, "only cco:   "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
