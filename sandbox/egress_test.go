package sandbox

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/sandbox/egress"
)

func TestPlanEgress(t *testing.T) {
	f := newFixture(t)
	p, _ := agent.Lookup("claude")
	env := []string{"XDG_RUNTIME_DIR=/run/user/1000"}
	dir := filepath.Join(f.rt, "cco-egress-x")
	for _, mode := range []string{egress.ModePublic, egress.ModeAllowlist} {
		s, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws, RuntimeDir: f.rt, Environ: env,
			Direct: true, Egress: mode, EgressDir: dir})
		must(t, err)
		c := &argvCheck{t: t, argv: Argv(s)}
		c.has("--unshare-net")
		// The proxy's directory comes after every tmpfs that would hide it,
		// read-only, at the fixed path the helper looks at.
		c.order(m("--tmpfs", "/tmp"), m("--tmpfs", "/run"), m("--tmpfs", "/run/user/1000"), m("--ro-bind", dir, EgressDir), m("--ro-bind", s.Marker, MarkerPath))
		// The helper must run (it hosts the bridge), although Direct asked not to.
		if len(s.Command) < 3 || s.Command[0] != SystemRoot+HelperPath || s.Command[1] != "exec" {
			t.Errorf("%s: command %q, want the helper", mode, s.Command)
		}
		if !strings.Contains(string(pr.Files[0].Data), `"egress":"`+mode+`"`) {
			t.Errorf("%s: marker %s", mode, pr.Files[0].Data)
		}
	}
	// Off (and unset, the closed default): no network, no proxy directory,
	// and bwrap may run the agent itself.
	for _, mode := range []string{egress.ModeOff, ""} {
		s, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws, RuntimeDir: f.rt, Direct: true, Egress: mode})
		must(t, err)
		c := &argvCheck{t: t, argv: Argv(s)}
		c.has("--unshare-net")
		c.lacksValue(EgressDir)
		if s.Command[0] != SystemRoot+p.Binary {
			t.Errorf("off: command %q", s.Command)
		}
		if !strings.Contains(string(pr.Files[0].Data), `"egress":"off"`) {
			t.Errorf("off: marker %s", pr.Files[0].Data)
		}
	}
	if _, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws, RuntimeDir: f.rt, Egress: egress.ModePublic}); err == nil ||
		!strings.Contains(err.Error(), "runtime directory") {
		t.Errorf("public without a proxy directory: %v", err)
	}
	if _, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws, RuntimeDir: f.rt, Egress: "host"}); err == nil ||
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
	must(t, err)
	pol, err := EgressPolicy(c, "claude", "/home/ada")
	must(t, err)
	if pol.Mode != egress.ModeAllowlist || !slices.Equal(pol.Allow, []string{"api.example.com", "*.mirror.example.com"}) ||
		!slices.Equal(pol.AllowHost, []string{"git.corp.example"}) || !slices.Equal(pol.AllowIP, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}) ||
		!slices.Equal(pol.Ports, []int{443, 8443}) || pol.LogPath != "/home/ada/logs/egress.log" {
		t.Errorf("policy %+v", pol)
	}
	// Unset keys: the library's defaults.
	pol, err = EgressPolicy(&Config{}, "codex", "/home/ada")
	must(t, err)
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
		must(t, err)
		if _, err := EgressPolicy(c, "claude", "/home/ada"); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ConfigPath) {
			t.Errorf("%q: %v, want an error naming %s and %s", text, err, want, ConfigPath)
		}
	}
}
