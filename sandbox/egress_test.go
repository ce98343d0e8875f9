package sandbox

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox/egress"
)

func TestPlanEgress(t *testing.T) {
	f := newFixture(t)
	p, _ := agent.Lookup("claude")
	env := []string{"XDG_RUNTIME_DIR=/run/user/1000"}
	sock := filepath.Join(f.rt, "1234.sock")
	for _, mode := range []string{egress.ModePublic, egress.ModeAllowlist} {
		s, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws, Environ: env,
			Direct: true, Egress: mode, EgressSocket: sock})
		testenv.Must(t, err)
		s.DataFD = 6
		c := &argvCheck{t: t, argv: Argv(s)}
		c.has("--unshare-net")
		// The proxy's socket comes after every tmpfs that would hide it,
		// read-only, at the fixed path the helper looks at.
		c.order(m("--tmpfs", "/tmp"), m("--tmpfs", "/run"), m("--ro-bind", sock, EgressSocket), m("--perms", "0444", "--ro-bind-data", "8", MarkerPath))
		// The helper must run (it hosts the bridge), although Direct asked not to.
		if len(s.Command) < 3 || s.Command[0] != SystemRoot+HelperPath || s.Command[1] != "exec" {
			t.Errorf("%s: command %q, want the helper", mode, s.Command)
		}
		if !strings.Contains(string(s.Marker), `"egress":"`+mode+`"`) {
			t.Errorf("%s: marker %s", mode, s.Marker)
		}
	}
	// Off (and unset, the closed default): no network, no proxy socket,
	// and bwrap may run the agent itself.
	for _, mode := range []string{egress.ModeOff, ""} {
		s, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws, Direct: true, Egress: mode})
		testenv.Must(t, err)
		c := &argvCheck{t: t, argv: Argv(s)}
		c.has("--unshare-net")
		c.lacksValue(EgressSocket)
		if s.Command[0] != SystemRoot+p.Binary {
			t.Errorf("off: command %q", s.Command)
		}
		if !strings.Contains(string(s.Marker), `"egress":"off"`) {
			t.Errorf("off: marker %s", s.Marker)
		}
	}
	// A socket directory outside the private /tmp (TMPDIR elsewhere) is
	// hidden in the jail: other sessions' sockets are there.
	for _, tc := range []struct {
		sock   string
		masked bool
	}{{"/srv/cco-test/cco-1000/1-a.sock", true}, {"/var/tmp/cco-1000/1-a.sock", false}, {"/tmp/cco-1000/1-a.sock", false}} {
		s, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws, Egress: egress.ModePublic, EgressSocket: tc.sock})
		testenv.Must(t, err)
		c := &argvCheck{t: t, argv: Argv(s)}
		dir := filepath.Dir(tc.sock)
		if tc.masked {
			c.order(m("--tmpfs", dir, "--remount-ro", dir), m("--ro-bind", tc.sock, EgressSocket))
		} else {
			c.lacks("--tmpfs", dir)
		}
	}
	if _, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws, Egress: egress.ModePublic}); err == nil ||
		!strings.Contains(err.Error(), "the proxy's socket") {
		t.Errorf("public without a proxy socket: %v", err)
	}
	if _, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws, Egress: "host"}); err == nil ||
		!strings.Contains(err.Error(), `egress "host"`) {
		t.Errorf("unknown mode: %v", err)
	}
}

func TestEgressPolicy(t *testing.T) {
	c, err := ParseConfig([]byte(`egress = "allowlist"
egress_allow = ["api.example.com", "*.mirror.example.com"]
allow_host = ["git.corp.example"]
allow_ip = ["10.20.0.0/16"]
egress_ports = [443, 8443]
egress_log = "~/logs/egress.log"
`), "sandbox.toml")
	testenv.Must(t, err)
	pol, err := EgressPolicy(c, "claude", "/home/ada", nil)
	testenv.Must(t, err)
	if pol.Mode != egress.ModeAllowlist || !slices.Equal(pol.Allow, []string{"api.example.com", "*.mirror.example.com"}) ||
		!slices.Equal(pol.AllowHost, []string{"git.corp.example"}) || !slices.Equal(pol.AllowIP, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}) ||
		!slices.Equal(pol.Ports, []int{443, 8443}) || pol.LogPath != "/home/ada/logs/egress.log" {
		t.Errorf("policy %+v", pol)
	}
	// Unset keys: the library's defaults.
	pol, err = EgressPolicy(&Config{}, "codex", "/home/ada", nil)
	testenv.Must(t, err)
	if pol.Mode != egress.ModePublic || !slices.Equal(pol.Ports, egress.DefaultPorts) || !slices.Equal(pol.Allow, egress.DefaultAllow("codex")) ||
		pol.LogPath != "/home/ada/.local/state/cco/egress.log" {
		t.Errorf("defaults %+v", pol)
	}
	for text, want := range map[string]string{
		"egress_ports = []\n":           "egress_ports",
		"egress_ports = [70000]\n":      "egress_ports",
		"allow_ip = [\"10.0.0.1/8\"]\n": "allow_ip",
		"egress_allow = [\"*\"]\n":      "egress_allow",
		"egress_log = \"rel/x.log\"\n":  "egress_log",
	} {
		c, err := ParseConfig([]byte(text), "sandbox.toml")
		testenv.Must(t, err)
		if _, err := EgressPolicy(c, "claude", "/home/ada", nil); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ConfigPath) {
			t.Errorf("%q: %v, want an error naming %s and %s", text, err, want, ConfigPath)
		}
	}
}

// JailConfig: an egress_upstream URL with credentials is rewritten to
// "env" in the jail's copy of sandbox.toml, the rest kept; without
// credentials nothing is rewritten; a key it cannot rewrite refuses.
func TestJailConfigHidesUpstreamCredentials(t *testing.T) {
	raw := "egress = \"allowlist\"\n  egress_upstream = \"http://ada:s3cr%40t@proxy.corp:8080\"\nhost_ports = [4000]\n"
	out, err := JailConfig([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "s3cr") || strings.Contains(out, "ada") || !strings.Contains(out, "egress = \"allowlist\"\n") || !strings.Contains(out, "host_ports = [4000]") {
		t.Errorf("the jail's sandbox.toml:\n%s", out)
	}
	if c, err := ParseConfig([]byte(out), ConfigPath); err != nil || c.EgressUpstream != "env" {
		t.Errorf("the jail's copy parses as %+v, %v", c, err)
	}
	for _, keep := range []string{"egress_upstream = \"http://proxy.corp:8080\"\n", "egress = \"off\"\n", ""} {
		if out, err := JailConfig([]byte(keep)); out != "" || err != nil {
			t.Errorf("%q: rewritten to %q, %v", keep, out, err)
		}
	}
	if _, err := JailConfig([]byte("egress_upstream = \"\"\"\nhttp://ada:s3cret@proxy.corp:8080\"\"\"\n")); err == nil || !strings.Contains(err.Error(), "one line of its own") {
		t.Errorf("a multi-line key: %v", err)
	}
}
