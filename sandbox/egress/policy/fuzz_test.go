package policy

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	agentpkg "github.com/cco-dev/cco/agent"
)

// labelsEndWith reports whether host's dot-separated labels end with
// suffix's and, when below is set, host has more of them. It is MatchRule's
// meaning written by labels instead of by string suffixes.
func labelsEndWith(host, suffix string, below bool) bool {
	h, s := strings.Split(host, "."), strings.Split(suffix, ".")
	if len(h) < len(s) || below && len(h) == len(s) {
		return false
	}
	return slices.Equal(h[len(h)-len(s):], s)
}

// FuzzParse feeds Parse any sandbox.toml for any agent of agent.Names()
// and checks what the shadow and the proxy rely on. A bad document is an
// error that starts with the key to fix. A good one gives a valid policy
// that survives the trip to the proxy (Encode, Decode) unchanged, whose
// host rules are normalised and match exactly the names they state, whose
// addresses are masked prefixes, and whose ports are distinct and in range.
func FuzzParse(f *testing.F) {
	for _, doc := range []string{
		"",
		`egress = "allowlist"`,
		`egress = "off"`,
		`egress = "allowlist"` + "\n" + `egress_allow = ["example.com", "*.Example.org.", " pypi.org "]`,
		`allow_host = ["gitlab.internal"]` + "\n" + `allow_ip = ["10.0.0.0/8", "::ffff:10.0.0.0/104", "fd00::1"]`,
		`egress_ports = [443, 443, 8443]`,
		`egress_log = "~/logs/egress.log"`,
		`egress_allow = ["*"]`,
		`egress_allow = ["https://example.com/"]`,
		`egress_allow = ["*.com"]`,
		`allow_ip = ["10.0.0.1/8"]`,
		`egress_ports = []`,
		`egress = 1`,
	} {
		for i := range agentpkg.Names() {
			f.Add(doc, "", "api.example.com", uint8(i))
		}
	}
	for i, r := range []string{"example.com", "*.example.com", "EXAMPLE.com.", "*.com", "*", "a..b", "10.0.0.1", "[::1]", "x.*.com", "-a.com", "a_b.example"} {
		f.Add("", r, "x.example.com", uint8(i))
	}
	names := agentpkg.Names()
	f.Fuzz(func(t *testing.T, doc, rule, host string, which uint8) {
		keys := map[string]any{}
		if _, err := toml.Decode(doc, &keys); err != nil {
			return
		}
		// A rule given apart reaches the host-rule checks without the
		// fuzzer having to spell it in TOML first.
		if _, ok := keys["egress_allow"]; !ok && rule != "" {
			keys["egress_allow"] = []any{rule}
		}
		// Every agent's default allowlist goes through the same checks.
		agent := names[int(which)%len(names)]
		p, err := Parse(keys, agent, "/home/ada")
		if err != nil {
			named := false
			for _, k := range Keys {
				if rest, ok := strings.CutPrefix(err.Error(), k); ok && (strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "[")) {
					named = true
				}
			}
			if !named {
				t.Fatalf("Parse(%q): the error %q does not start with the key to fix", doc, err)
			}
			return
		}
		if err := p.Validate(); err != nil && p.Mode != ModeOff {
			t.Fatalf("Parse(%q) = %+v, which Validate refuses: %v", doc, p, err)
		}
		if p.Mode != ModeOff {
			line, err := p.Encode()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Decode(line)
			if err != nil || !reflect.DeepEqual(back, p) {
				t.Fatalf("Parse(%q) = %+v; through the proxy's pipe it is %+v, %v", doc, p, back, err)
			}
		}
		for _, rules := range [][]string{p.Allow, p.AllowHost} {
			for _, r := range rules {
				suffix, wild := strings.CutPrefix(r, "*.")
				if r != strings.ToLower(r) || strings.HasSuffix(r, ".") || !ValidName(suffix) {
					t.Fatalf("Parse(%q): rule %q is not a normalised host rule", doc, r)
				}
				if wild && (MatchRule([]string{r}, suffix) || !MatchRule([]string{r}, "a."+suffix) || !strings.Contains(suffix, ".")) {
					t.Fatalf("Parse(%q): wildcard %q must match the names below %s, never %s itself", doc, r, suffix, suffix)
				}
				if !wild && !MatchRule([]string{r}, r) {
					t.Fatalf("Parse(%q): rule %q does not match itself", doc, r)
				}
			}
			if !MatchRule(rules, host) {
				continue
			}
			if !slices.ContainsFunc(rules, func(r string) bool {
				suffix, wild := strings.CutPrefix(r, "*.")
				return wild && labelsEndWith(host, suffix, true) || !wild && host == r
			}) {
				t.Fatalf("Parse(%q): %q matches %q, yet no rule names it", doc, host, rules)
			}
		}
		for _, pfx := range p.AllowIP {
			if pfx != pfx.Masked() || pfx.Addr().Is4In6() || pfx.Addr().Zone() != "" {
				t.Fatalf("Parse(%q): allow_ip %v is not a masked, unmapped prefix", doc, pfx)
			}
		}
		if len(p.Ports) == 0 {
			t.Fatalf("Parse(%q): no ports", doc)
		}
		for i, n := range p.Ports {
			if n < 1 || n > 65535 || slices.Contains(p.Ports[:i], n) {
				t.Fatalf("Parse(%q): ports %v", doc, p.Ports)
			}
		}
		if !filepath.IsAbs(p.LogPath) || filepath.Clean(p.LogPath) != p.LogPath {
			t.Fatalf("Parse(%q): egress_log %q is not a clean absolute path", doc, p.LogPath)
		}
	})
}
