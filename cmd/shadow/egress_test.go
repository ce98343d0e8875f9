package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/sandbox/egress"
)

// The egress jail through the real shadow: SANDBOX.md item 19 and the
// abstract-socket half of item 17. Every packet stays on the host's
// loopback or inside the jail's own empty network namespace.

// withConfig writes the shared root's sandbox.toml for one test.
func withConfig(t *testing.T, root, text string) {
	t.Helper()
	cfg := filepath.Join(root, "etc/cco/sandbox.toml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(cfg) })
}

// upstream is a loopback HTTP server on the host.
func upstream(t *testing.T) (addr string, port int) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the host upstream")
	}))
	t.Cleanup(srv.Close)
	a := srv.Listener.Addr().(*net.TCPAddr)
	return a.String(), a.Port
}

func TestEgressJail(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	up, port := upstream(t)
	abstract := "cco-test-abstract-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	al, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	probe := params(map[string]any{"mode": "net", "upstream": up, "abstract": abstract})

	for _, name := range []string{"claude", "codex"} {
		t.Run(name+"/loopback refused", func(t *testing.T) {
			// The upstream's port is allowed, so the refusal is the address's.
			withConfig(t, root, fmt.Sprintf("egress_ports = [%d]\n", port))
			w := newWorld(t, asNobody)
			r := runCmd(t, w.cmd(root, name, w.ws, "probe", probe))
			if r.code != 0 || r.report == nil {
				t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
			}
			rep := r.report
			t.Logf("report: ifaces %q tcp %q udp %q dns %q abstract %q proxy %q %q", rep["ifaces"], rep["tcp_direct"], rep["udp_direct"], rep["dns"], rep["abstract"], rep["via_proxy"], rep["via_proxy_reason"])
			if rep["ifaces"] != "lo" {
				t.Fatalf("item 19: interfaces %q, want only lo", rep["ifaces"])
			}
			for _, k := range []string{"tcp_loopback", "tcp_direct", "udp_direct", "dns", "abstract"} {
				if !denied(rep[k]) {
					t.Errorf("%s = %q, want a failure", k, rep[k])
				}
			}
			for _, k := range []string{"tcp_direct", "udp_direct"} {
				if rep[k] != "ENETUNREACH" {
					t.Errorf("%s = %q, want ENETUNREACH (no route out of the empty namespace)", k, rep[k])
				}
			}
			if !strings.Contains(rep["dns"], "network is unreachable") {
				t.Errorf("dns = %q, want network is unreachable", rep["dns"])
			}
			if rep["abstract"] != "ECONNREFUSED" {
				t.Errorf("item 17: the host's abstract socket: %q, want ECONNREFUSED", rep["abstract"])
			}
			pu := rep["env_HTTPS_PROXY"]
			if !strings.HasPrefix(pu, "http://127.0.0.1:") {
				t.Fatalf("HTTPS_PROXY = %q, want http://127.0.0.1:<port>", pu)
			}
			for _, k := range []string{"https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"} {
				if rep["env_"+k] != pu {
					t.Errorf("%s = %q, want %q", k, rep["env_"+k], pu)
				}
			}
			if rep["env_NO_PROXY"] != "localhost,127.0.0.1,::1" || rep["env_no_proxy"] != "localhost,127.0.0.1,::1" {
				t.Errorf("NO_PROXY %q no_proxy %q", rep["env_NO_PROXY"], rep["env_no_proxy"])
			}
			if rep["via_proxy"] != "403" || !strings.Contains(rep["via_proxy_reason"], "loopback") {
				t.Errorf("through the proxy to the host's loopback: %q reason %q, want 403 for loopback", rep["via_proxy"], rep["via_proxy_reason"])
			}
			if !strings.Contains(rep["marker"], `"egress":"public"`) {
				t.Errorf("marker %q", rep["marker"])
			}
			// The audit log is the user's, and records the refusal.
			log := w.home + "/.local/state/cco/egress.log"
			fi, err := os.Stat(log)
			if err != nil {
				t.Fatalf("audit log: %v", err)
			}
			if uid := statUID(fi); uid != asNobody.uid {
				t.Errorf("audit log owned by uid %d, want the user's %d", uid, asNobody.uid)
			}
			es, err := egress.ReadAudit(log)
			if err != nil || len(es) != 1 || es[0].Allowed || es[0].Target != up {
				t.Errorf("audit %+v %v, want one refusal of %s", es, err, up)
			}
		})
	}

	t.Run("host_ports opens the host's port", func(t *testing.T) {
		withConfig(t, root, fmt.Sprintf("host_ports = [%d]\n", port))
		w := newWorld(t, asNobody)
		r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", probe))
		if r.code != 0 || r.report == nil {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		if r.report["via_proxy"] != "200" || r.report["via_proxy_body"] != "hello from the host upstream" {
			t.Errorf("through proxy, socket and bridge: %q %q reason %q", r.report["via_proxy"], r.report["via_proxy_body"], r.report["via_proxy_reason"])
		}
		// The jail's own loopback port is carried to the host's; still
		// no other way out.
		if r.report["tcp_loopback"] != "ok" || r.report["ifaces"] != "lo" || r.report["tcp_direct"] != "ENETUNREACH" {
			t.Errorf("the jail's 127.0.0.1:%d %q, ifaces %q, direct %q", port, r.report["tcp_loopback"], r.report["ifaces"], r.report["tcp_direct"])
		}
		es, err := egress.ReadAudit(w.home + "/.local/state/cco/egress.log")
		if err != nil || len(es) != 2 || !es[0].Allowed || !es[1].Allowed {
			t.Errorf("audit %+v %v, want two allowed connections (the direct one and the proxied request)", es, err)
		}
	})
}

func TestEgressOff(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	withConfig(t, root, "egress = \"off\"\n")
	w := newWorld(t, asNobody)
	r := runCmd(t, w.cmd(root, "codex", w.ws, "probe", params(map[string]any{"mode": "net"})))
	if r.code != 0 || r.report == nil {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, egress.OffBanner()) {
		t.Errorf("stderr %q lacks the off banner", r.stderr)
	}
	for k, v := range r.report {
		if strings.HasPrefix(k, "env_") && v != "" {
			t.Errorf("%s = %q with egress off", k, v)
		}
	}
	if r.report["ifaces"] != "lo" || r.report["tcp_direct"] != "ENETUNREACH" {
		t.Errorf("ifaces %q tcp %q", r.report["ifaces"], r.report["tcp_direct"])
	}
	if _, err := os.Stat(w.home + "/.local/state/cco/egress.log"); err == nil {
		t.Error("an audit log was opened with egress off")
	}
}

// TestEgressFailsClosed: a bad policy value, or a proxy that cannot start,
// means exit 126 with the reason, and the agent never runs.
func TestEgressFailsClosed(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	longTmp := filepath.Join(os.TempDir(), "cco-"+strings.Repeat("d", 100))
	if err := os.MkdirAll(longTmp, 0o777); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(longTmp)
	os.Chmod(longTmp, 0o1777)
	for _, tc := range []struct {
		name, cfg, tmp string
		// proxy, when set, replaces the egress-proxy program ("" removes it).
		proxy *string
		want  []string
	}{
		{"bad port", "egress_ports = [0]\n", "", nil, []string{"egress_ports", "sandbox.toml"}},
		{"bad allow_ip", "allow_ip = [\"10.0.0.1/8\"]\n", "", nil, []string{"allow_ip", "10.0.0.0/8"}},
		{"loopback allow_ip", "allow_ip = [\"127.0.0.1\"]\n", "", nil, []string{"allow_ip", "127.0.0.1", "host_ports = [4000]"}},
		{"bad egress_upstream", "egress_upstream = \"socks5://proxy.corp:1080\"\n", "", nil, []string{"egress_upstream", "must be http://"}},
		{"bad host_ports", "host_ports = [3128]\n", "", nil, []string{"host_ports", "3128"}},
		{"audit log cannot open", "egress_log = \"/dev/null/egress.log\"\n", "", nil, []string{"the egress proxy cannot start", "/dev/null"}},
		{"socket path too long", "", longTmp, nil, []string{"the egress proxy cannot start", "shorter runtime directory"}},
		{"proxy missing", "", "", ptr(""), []string{"egress proxy " + root + "/usr/libexec/cco/egress-proxy is missing", "fix: sudo cco-install"}},
		{"proxy not executable", "", "", ptr("-"), []string{"egress proxy " + root + "/usr/libexec/cco/egress-proxy is missing or not executable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg != "" {
				withConfig(t, root, tc.cfg)
			}
			if tc.proxy != nil {
				withProxy(t, root, *tc.proxy)
			}
			w := newWorld(t, asNobody)
			c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "probe", "root": root}))
			if tc.tmp != "" {
				c.Env = append(c.Env, "TMPDIR="+tc.tmp)
			}
			r := runCmd(t, c)
			if r.code != 126 {
				t.Errorf("exit %d, want 126\nstderr %s", r.code, r.stderr)
			}
			for _, s := range tc.want {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr %q lacks %q", r.stderr, s)
				}
			}
			if r.stdout != "" {
				t.Errorf("the agent ran: %s", r.stdout)
			}
			if _, err := os.Stat(w.ws + "/from-jail"); err == nil {
				t.Error("the agent ran: it wrote the workspace")
			}
			if tc.tmp != "" {
				// The user's socket directory stays, empty.
				shared := "cco-" + strconv.Itoa(w.u.uid)
				ents, _ := os.ReadDir(tc.tmp)
				for _, e := range ents {
					inside, _ := os.ReadDir(filepath.Join(tc.tmp, e.Name()))
					if e.Name() != shared || len(inside) != 0 {
						t.Errorf("left behind in %s: %s %v", tc.tmp, e.Name(), inside)
					}
				}
			}
		})
	}
}

// TestEgressProxyNewAndBrokenRefused: a proxy program this user's launches
// have not heard serve yet (new, or changed by an upgrade) is started before
// the jail; one that does not say ready stops the launch: exit 126 with the
// reason, and the agent never runs.
func TestEgressProxyNewAndBrokenRefused(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	for _, tc := range []struct{ name, script, want string }{
		{"exits before serving", "#!/bin/sh\necho dying >&2\nexit 3\n", "exited before serving"},
		{"says why", "#!/bin/sh\necho 'error: the test proxy gives up'\nexit 1\n", "the test proxy gives up"},
		{"says something else", "#!/bin/sh\necho listening\nexec sleep 30\n", `said "listening"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withProxy(t, root, tc.script)
			w := newWorld(t, asNobody)
			r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "probe", "root": root})))
			if r.code != 126 || !strings.Contains(r.stderr, "cco: not starting claude: the egress proxy cannot start") || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, want 126 saying %q\nstderr %s", r.code, tc.want, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("the agent ran: %s", r.stdout)
			}
		})
	}
}

// TestEgressProxyFailingEndsSession: a proxy program heard before starts
// with the session's first connection; one that then cannot serve ends the
// session (its socket refused the agent's connections meanwhile), exit 126
// with the reason.
func TestEgressProxyFailingEndsSession(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	up, port := upstream(t)
	withConfig(t, root, fmt.Sprintf("egress_ports = [%d]\n", port))
	for _, tc := range []struct{ name, broken, want string }{
		{"exits before serving", "echo dying >&2; exit 3", "exited before serving"},
		{"says why", "echo 'error: the test proxy gives up'; exit 1", "the test proxy gives up"},
		{"dies while serving", "echo ready; exit 0", "exited during the session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Says ready (and reads its input to the end, as a proxy
			// does) until the flag exists, then breaks.
			flag := filepath.Join(t.TempDir(), "broken")
			withProxy(t, root, "#!/bin/sh\nif [ -e "+flag+" ]; then "+tc.broken+"; fi\necho ready\nwhile read -r l; do :; done\n")
			w := newWorld(t, asRoot) // the flag is in the test's own directory
			if r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "exit"}))); r.code != 0 {
				t.Fatalf("hearing the proxy: exit %d\nstderr %s", r.code, r.stderr)
			}
			os.WriteFile(flag, nil, 0o644)
			start := time.Now()
			r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "net", "upstream": up})))
			if r.code != 126 || !strings.Contains(r.stderr, "cco: claude was stopped: ") || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, want 126 saying %q\nstderr %s", r.code, tc.want, r.stderr)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the session lasted %v: the failing proxy did not end it", d)
			}
		})
	}
}

// TestEgressProxyStartsOnFirstConnection: a proxy program heard before
// starts with a session's first connection, and not for a session that
// makes none (whose audit log is still opened before the jail).
func TestEgressProxyStartsOnFirstConnection(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	// A proxy that leaves a trace of having been started, then serves.
	mark := filepath.Join(t.TempDir(), "started")
	withProxy(t, root, "#!/bin/sh\necho started >> "+mark+"\nexec "+filepath.Join(root, "usr/libexec/cco/egress-proxy.real")+" \"$@\"\n")
	w := newWorld(t, asRoot)
	starts := func() int {
		b, _ := os.ReadFile(mark)
		return strings.Count(string(b), "started")
	}
	exit := params(map[string]any{"mode": "exit"})
	if r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", exit)); r.code != 0 || starts() != 1 {
		t.Fatalf("a new program is heard before the jail: exit %d, %d starts\nstderr %s", r.code, starts(), r.stderr)
	}
	// Gone before the quiet session, so that finding it again proves it
	// was opened before the jail.
	os.Remove(w.home + "/.local/state/cco/egress.log")
	if r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", exit)); r.code != 0 || starts() != 1 {
		t.Errorf("a session without a connection started the proxy: exit %d, %d starts\nstderr %s", r.code, starts(), r.stderr)
	}
	if _, err := os.Stat(w.home + "/.local/state/cco/egress.log"); err != nil {
		t.Errorf("the audit log was not opened before the jail: %v", err)
	}
	up, port := upstream(t)
	withConfig(t, root, fmt.Sprintf("egress_ports = [%d]\n", port))
	r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "net", "upstream": up})))
	if r.code != 0 || r.report == nil {
		t.Fatalf("exit %d\nstderr %s", r.code, r.stderr)
	}
	if starts() != 2 {
		t.Errorf("%d starts, want one more for the session with a connection", starts())
	}
	if r.report["via_proxy"] != "403" {
		t.Errorf("via_proxy = %q, want the proxy's 403 for loopback", r.report["via_proxy"])
	}
}

// TestEgressProxySurvivesTerminalSignals: a ^C for the terminal's jobs
// reaches the whole process group, the egress proxy too; it must not end the
// session as a failed proxy (the agent gets the signal, the shadow its
// status).
func TestEgressProxySurvivesTerminalSignals(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	// A program not heard yet: started before the jail, so it runs while
	// the agent sleeps.
	withProxy(t, root, "#!/bin/sh\nexec "+filepath.Join(root, "usr/libexec/cco/egress-proxy.real")+" \"$@\"\n")
	w := newWorld(t, asNobody)
	tag := "sig" + strconv.FormatInt(time.Now().UnixNano(), 36)
	c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "sleep", "tag": tag}))
	c.SysProcAttr.Setpgid = true
	var errb strings.Builder
	c.Stderr = &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(w.ws, "started-"+tag))
	syscall.Kill(-c.Process.Pid, syscall.SIGINT)
	err := c.Wait()
	code := c.ProcessState.ExitCode()
	if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	if code != 130 || strings.Contains(errb.String(), "egress proxy") {
		t.Errorf("exit %d (%v), want 130 with nothing about the proxy\nstderr %s", code, err, errb.String())
	}
}

func ptr(s string) *string { return &s }

// withProxy replaces the root's egress-proxy program with script (or
// removes it, for ""; "-" leaves a file that is not executable) until the
// test ends. The real one stays at egress-proxy.real.
func withProxy(t *testing.T, root, script string) {
	t.Helper()
	p := filepath.Join(root, "usr/libexec/cco/egress-proxy")
	if err := os.Rename(p, p+".real"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(p+".real", p) })
	switch script {
	case "":
	case "-":
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	default:
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func statUID(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// TestHelperRefusesWithoutBridge: a jail whose marker asks for a proxy but
// whose bound egress socket is no socket never runs the agent: the helper
// exits 126.
func TestHelperRefusesWithoutBridge(t *testing.T) {
	root := systemRoot(t)
	w := newWorld(t, asRoot)
	rt, err := os.MkdirTemp("", "cco-jail-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(rt)
	notSocket := filepath.Join(rt, "no-proxy")
	os.WriteFile(notSocket, nil, 0o600)
	sandbox.SystemRoot = root
	defer func() { sandbox.SystemRoot = "" }()
	p, _ := agent.Lookup("claude")
	spec, prep, err := sandbox.Plan(&sandbox.Launch{Profile: p, Config: &sandbox.Config{}, Home: w.home, User: "root",
		Cwd: w.ws, Session: "t", Args: []string{"probe", params(map[string]any{"mode": "probe", "root": root})},
		Direct: true, Egress: egress.ModePublic, EgressSocket: notSocket})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := sandbox.Prepare(w.home, "", prep)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Finish()
	c, done := newBareBwrap(t, spec, w.ws).cmd(t)
	defer done()
	r := runCmd(t, c)
	if r.code != 126 || !strings.Contains(r.stderr, "not starting") || !strings.Contains(r.stderr, sandbox.EgressSocket) || r.stdout != "" {
		t.Errorf("exit %d stdout %q stderr %q, want 126 naming %s and no agent", r.code, r.stdout, r.stderr, sandbox.EgressSocket)
	}
	if _, err := os.Stat(w.ws + "/from-jail"); err == nil {
		t.Error("the agent ran")
	}
}
