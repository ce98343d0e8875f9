package policy

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
)

func TestParsePolicyDefaults(t *testing.T) {
	for _, agent := range []string{"claude", "codex", "gemini"} {
		p, err := Parse(map[string]any{"workspace_root": "", "forge": []any{"github"}}, agent, "/home/u")
		if err != nil {
			t.Fatal(err)
		}
		if p.Mode != ModePublic {
			t.Errorf("%s: mode %q, want public", agent, p.Mode)
		}
		if !reflect.DeepEqual(p.Ports, []int{80, 443}) {
			t.Errorf("%s: ports %v, want [80 443]", agent, p.Ports)
		}
		if p.LogPath != "/home/u/.local/state/cco/egress.log" {
			t.Errorf("%s: log %q", agent, p.LogPath)
		}
		if !reflect.DeepEqual(p.Allow, DefaultAllow(agent)) {
			t.Errorf("%s: allow %v, want the defaults", agent, p.Allow)
		}
		if p.AllowHost != nil || p.AllowIP != nil {
			t.Errorf("%s: holes by default: %v %v", agent, p.AllowHost, p.AllowIP)
		}
	}
}

func TestDefaultAllow(t *testing.T) {
	claude, codex := DefaultAllow("claude"), DefaultAllow("codex")
	for _, want := range []string{"api.anthropic.com", "registry.npmjs.org", "github.com", "proxy.golang.org", "pypi.org"} {
		if !slices.Contains(claude, want) {
			t.Errorf("claude defaults lack %s", want)
		}
	}
	for _, want := range []string{"api.openai.com", "auth.openai.com", "chatgpt.com", "registry.npmjs.org", "github.com"} {
		if !slices.Contains(codex, want) {
			t.Errorf("codex defaults lack %s", want)
		}
	}
	gemini := DefaultAllow("gemini")
	for _, want := range []string{"generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com", "accounts.google.com", "registry.npmjs.org"} {
		if !slices.Contains(gemini, want) {
			t.Errorf("gemini defaults lack %s", want)
		}
	}
	if slices.Contains(claude, "api.openai.com") || slices.Contains(codex, "api.anthropic.com") ||
		slices.Contains(gemini, "api.anthropic.com") || slices.Contains(claude, "generativelanguage.googleapis.com") {
		t.Error("an agent's defaults include another vendor")
	}
	// Every shipped rule must pass the same validation as an operator's.
	for _, agent := range []string{"claude", "codex", "gemini"} {
		if _, err := hostRules("egress_allow", DefaultAllow(agent)); err != nil {
			t.Errorf("%s defaults: %v", agent, err)
		}
	}
	// The defaults are a copy: changing one result does not change the next.
	claude[0] = "evil.example"
	if DefaultAllow("claude")[0] == "evil.example" {
		t.Error("DefaultAllow shares its backing array")
	}
}

func TestParsePolicyValues(t *testing.T) {
	p, err := Parse(map[string]any{
		"egress":       "allowlist",
		"egress_allow": []any{"Example.COM.", "*.corp.example"},
		"allow_host":   []string{"git.internal.example"},
		"allow_ip":     []any{"10.1.2.3", "10.8.0.0/16", "fd00::/8", "::ffff:192.168.0.0/112"},
		"egress_ports": []any{int64(443), int64(8443), int64(443)},
		"egress_log":   "~/logs/e.log",
	}, "codex", "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	want := Policy{
		Mode:      ModeAllowlist,
		Allow:     []string{"example.com", "*.corp.example"},
		AllowHost: []string{"git.internal.example"},
		AllowIP: []netip.Prefix{netip.MustParsePrefix("10.1.2.3/32"), netip.MustParsePrefix("10.8.0.0/16"),
			netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("192.168.0.0/16")},
		Ports:   []int{443, 8443},
		LogPath: "/home/u/logs/e.log",
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("got  %+v\nwant %+v", p, want)
	}
	p, err = Parse(map[string]any{"egress": "off", "egress_ports": []int{22}, "egress_log": "/var/log/x.log"}, "claude", "")
	if err != nil || p.Mode != ModeOff || !reflect.DeepEqual(p.Ports, []int{22}) || p.LogPath != "/var/log/x.log" {
		t.Errorf("off: %+v, %v", p, err)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	for _, tc := range []struct {
		keys  map[string]any
		agent string
		want  string
	}{
		{map[string]any{}, "cursor", `unknown agent "cursor"`},
		{map[string]any{"egress": "none"}, "claude", `egress: "none" is not one of public, allowlist, off`},
		{map[string]any{"egress": true}, "claude", "egress: want a string"},
		{map[string]any{"egress_allow": "example.com"}, "claude", "egress_allow: want a list of strings"},
		{map[string]any{"egress_allow": []any{1}}, "claude", "egress_allow[0]: want a string"},
		{map[string]any{"egress_allow": []any{"*"}}, "claude", `egress_allow: "*" matches everything`},
		{map[string]any{"egress_allow": []any{"https://example.com"}}, "claude", "not a host name"},
		{map[string]any{"egress_allow": []any{"example.com:443"}}, "claude", "ports go in egress_ports"},
		{map[string]any{"egress_allow": []any{"10.0.0.1"}}, "claude", "put addresses in allow_ip"},
		{map[string]any{"egress_allow": []any{"a.*.example"}}, "claude", `only as a leading "*."`},
		{map[string]any{"egress_allow": []any{"*.com"}}, "claude", "whole top-level domain"},
		{map[string]any{"egress_allow": []any{"bad_name!.com"}}, "claude", "not a valid host name"},
		// A name ending in a number is an IPv4 address to an upstream's
		// getaddrinfo (2130706433 is 127.0.0.1).
		{map[string]any{"egress_allow": []any{"2130706433"}}, "claude", "not a valid host name"},
		{map[string]any{"egress_allow": []any{"a.0x7f"}}, "claude", "not a valid host name"},
		{map[string]any{"allow_host": []any{"-x.example"}}, "claude", "allow_host:"},
		{map[string]any{"allow_ip": []any{"10.0.0.1/8"}}, "claude", "did you mean 10.0.0.0/8"},
		{map[string]any{"allow_ip": []any{"intranet"}}, "claude", `allow_ip: "intranet" is not an address or CIDR`},
		{map[string]any{"allow_ip": []any{"10.0.0.0/33"}}, "claude", "allow_ip:"},
		{map[string]any{"allow_ip": []any{"fe80::1%eth0"}}, "claude", "zones are not allowed"},
		{map[string]any{"egress_ports": []any{}}, "claude", `egress_ports: the list is empty; to cut the network use egress = "off"`},
		{map[string]any{"egress_ports": []any{int64(0)}}, "claude", "egress_ports[0]: 0 is not a port"},
		{map[string]any{"egress_ports": []any{int64(70000)}}, "claude", "70000 is not a port"},
		{map[string]any{"egress_ports": []any{"443"}}, "claude", "egress_ports[0]: want a port number"},
		{map[string]any{"egress_ports": 443}, "claude", "egress_ports: want a list"},
		{map[string]any{"egress_log": "logs/e.log"}, "claude", "egress_log: \"logs/e.log\" is not absolute"},
		{map[string]any{"egress_log": 5}, "claude", "egress_log: want a path string"},
		{map[string]any{"egress_log": "~/e.log"}, "claude-no-home", "needs the home directory"},
	} {
		agent, home := tc.agent, "/home/u"
		if agent == "claude-no-home" {
			agent, home = "claude", ""
		}
		_, err := Parse(tc.keys, agent, home)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.keys, err, tc.want)
		}
	}
}

func TestMatchRule(t *testing.T) {
	rules := []string{"exact.example", "*.wild.example"}
	for host, want := range map[string]bool{
		"exact.example":       true,
		"sub.exact.example":   false,
		"a.wild.example":      true,
		"a.b.wild.example":    true,
		"wild.example":        false, // "*.x" is below x, not x itself
		"evilwild.example":    false,
		"wild.example.evil":   false,
		"exact.example.other": false,
	} {
		if got := MatchRule(rules, host); got != want {
			t.Errorf("MatchRule(%s) = %v, want %v", host, got, want)
		}
	}
}

func TestOffBannerAndSummary(t *testing.T) {
	b := OffBanner()
	for _, want := range []string{"EGRESS IS OFF", "NO NETWORK", `egress = "off"`, "/etc/cco/sandbox.toml"} {
		if !strings.Contains(b, want) {
			t.Errorf("the off banner lacks %q:\n%s", want, b)
		}
	}
	if s := (Policy{Mode: ModeOff}).Summary(); !strings.Contains(s, "egress off") {
		t.Errorf("off summary %q", s)
	}
	if s := (Policy{}).Summary(); !strings.Contains(s, "egress public") || !strings.Contains(s, "[80 443]") {
		t.Errorf("default summary %q", s)
	}
	if s := (Policy{Mode: ModeAllowlist, Allow: []string{"a.example"}, Ports: []int{443}}).Summary(); !strings.Contains(s, "allowlist: 1 rules") {
		t.Errorf("allowlist summary %q", s)
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := (Policy{Mode: ModeOff}).Validate(); err == nil || !strings.Contains(err.Error(), "off") {
		t.Errorf("off validated: %v", err)
	}
	if err := (Policy{Mode: "open"}).Validate(); err == nil || !strings.Contains(err.Error(), `"open"`) {
		t.Errorf("bad mode validated: %v", err)
	}
	if err := (Policy{Ports: []int{0}}).Validate(); err == nil {
		t.Error("port 0 validated")
	}
	if err := (Policy{}).Validate(); err != nil {
		t.Errorf("zero policy: %v", err)
	}
}

// TestLoginEndpointsAllowed: every profile's login endpoints are in its
// default allowlist, so that the paste-code and device logins pass the
// proxy in allowlist mode; another vendor's are not (but for the forges
// every agent reaches: github.com is Copilot CLI's login, and Pi's).
func TestLoginEndpointsAllowed(t *testing.T) {
	common, err := hostRules("egress_allow", commonAllow)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range agent.Names() {
		p, _ := agent.Lookup(name)
		if len(p.LoginEndpoints) == 0 {
			t.Errorf("%s: no login endpoints", name)
		}
		pol, err := Parse(map[string]any{"egress": "allowlist"}, name, "/home/u")
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range p.LoginEndpoints {
			if !MatchRule(pol.Allow, h) {
				t.Errorf("%s: allowlist mode refuses the login endpoint %s", name, h)
			}
		}
		for _, o := range agent.All() {
			for _, h := range o.LoginEndpoints {
				if o != p && !slices.Contains(p.Egress, h) && !slices.Contains(p.LoginEndpoints, h) && !MatchRule(common, h) && MatchRule(pol.Allow, h) {
					t.Errorf("%s's allowlist carries %s's login endpoint %s", name, o.Name, h)
				}
			}
		}
		if _, err := hostRules("egress_allow", DefaultAllow(name)); err != nil {
			t.Errorf("%s's defaults with its login endpoints: %v", name, err)
		}
	}
}

// allow_ip refuses the loopback range, naming host_ports; host_ports
// refuses the proxy endpoint's port.
func TestLoopbackAllowIPRefused(t *testing.T) {
	// 0.0.0.0 and :: connect to the host's own loopback on Linux.
	for _, s := range []string{"127.0.0.1", "127.0.0.1/32", "127.1.0.0/16", "::1", "::ffff:127.0.0.1", "0.0.0.0/0",
		"0.0.0.0", "::", "0.0.0.0/8", "::/96", "::ffff:0.0.0.0"} {
		_, err := Parse(map[string]any{"allow_ip": []any{s}}, "claude", "/home/u")
		if err == nil || !strings.Contains(err.Error(), "host_ports") {
			t.Errorf("allow_ip %q: %v, want a refusal naming host_ports", s, err)
		}
	}
	p, err := Parse(map[string]any{"host_ports": []any{int64(4000), int64(4000), int64(8080)}}, "claude", "/home/u")
	if err != nil || len(p.HostPorts) != 2 {
		t.Fatalf("host_ports: %v %v", p.HostPorts, err)
	}
	if _, err := Parse(map[string]any{"host_ports": []any{int64(EndpointPort)}}, "claude", "/home/u"); err == nil {
		t.Error("host_ports took the proxy endpoint's port")
	}
	b, _ := p.Encode()
	if q, err := Decode(b); err != nil || len(q.HostPorts) != 2 {
		t.Errorf("decode: %v %v", q.HostPorts, err)
	}
}

func TestSSHHostsParse(t *testing.T) {
	p, err := Parse(map[string]any{"ssh_hosts": []any{"GitHub.com", "git.corp.example."}}, "claude", "/home/u")
	if err != nil || strings.Join(p.SSHHosts, ",") != "github.com,git.corp.example" {
		t.Fatalf("ssh_hosts: %v %v", p.SSHHosts, err)
	}
	for _, bad := range []string{"*.corp.example", "10.0.0.1", "git.corp.example:22", "ssh://github.com"} {
		if _, err := Parse(map[string]any{"ssh_hosts": []any{bad}}, "claude", "/home/u"); err == nil || !strings.Contains(err.Error(), "ssh_hosts") {
			t.Errorf("ssh_hosts %q: %v", bad, err)
		}
	}
}

// TestValidNameRefusesNumbers: a host whose last label is a number, in
// decimal or hexadecimal, is an address in inet_aton's forms, not a name.
func TestValidNameRefusesNumbers(t *testing.T) {
	for _, s := range []string{"2130706433", "127.1", "0x7f.1", "0177.0.0.1", "0x7f000001", "a.b.0x", "host.123"} {
		if ValidName(s) {
			t.Errorf("ValidName(%q) = true", s)
		}
	}
	for _, s := range []string{"api.anthropic.com", "1password.com", "x.0xfoo", "a1.b2c", "123.example"} {
		if !ValidName(s) {
			t.Errorf("ValidName(%q) = false", s)
		}
	}
}
