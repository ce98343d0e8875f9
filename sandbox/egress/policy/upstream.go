package policy

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// The values of egress_upstream besides a proxy URL.
const (
	// UpstreamEnv, the default, takes the invoking user's proxy variables
	// as curl reads them.
	UpstreamEnv = "env"
	// UpstreamNone dials every destination directly.
	UpstreamNone = "none"
)

// UpstreamProxy is one upstream HTTP proxy that the egress proxy forwards
// an allowed request through, once its own policy has allowed it.
type UpstreamProxy struct {
	// Addr is host:port, as written: what the audit log records as via.
	Addr string
	// User and Password, when set, go to the upstream as Basic
	// credentials (Proxy-Authorization). They travel to the egress-proxy
	// process on its standard input and never into the jail.
	User     string `json:",omitempty"`
	Password string `json:",omitempty"`
}

// Upstream is egress_upstream resolved against the invoking user's
// environment: the upstream for CONNECT (https and every other tunnel),
// the one for plain http, and the destinations dialled directly.
type Upstream struct {
	// Setting is the key's value as Summary shows it: "env", "none", or
	// the URL without its credentials.
	Setting string `json:",omitempty"`
	// Source names where the proxies came from (the variable, or
	// "egress_upstream"), for Summary.
	Source  string         `json:",omitempty"`
	Connect *UpstreamProxy `json:",omitempty"`
	HTTP    *UpstreamProxy `json:",omitempty"`
	// NoProxy are no_proxy's entries: destinations dialled directly.
	NoProxy []string `json:",omitempty"`
}

// ParseUpstreamSetting checks egress_upstream's value: "env", "none" or
// an http:// proxy URL.
func ParseUpstreamSetting(v string) error {
	if v == "" || v == UpstreamEnv || v == UpstreamNone {
		return nil
	}
	_, err := parseProxyURL("egress_upstream", v, false)
	return err
}

// ResolveUpstream is egress_upstream's value (setting; "" is "env")
// resolved with the invoking user's environment. For "env": CONNECT goes
// through https_proxy (else HTTPS_PROXY, else http_proxy, else
// HTTP_PROXY), plain http through http_proxy (else HTTP_PROXY), and
// no_proxy (else NO_PROXY) names the destinations dialled directly, as
// curl reads them. A variable that is not an http proxy URL is an error
// naming it.
func ResolveUpstream(setting string, environ []string) (Upstream, error) {
	switch setting {
	case UpstreamNone:
		return Upstream{Setting: UpstreamNone}, nil
	case "", UpstreamEnv:
	default:
		p, err := parseProxyURL("egress_upstream", setting, false)
		if err != nil {
			return Upstream{}, err
		}
		return Upstream{Setting: redacted(setting), Source: "egress_upstream", Connect: p, HTTP: p}, nil
	}
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = strings.TrimSpace(v)
		}
	}
	first := func(names ...string) (string, string) {
		for _, n := range names {
			if v := env[n]; v != "" {
				return n, v
			}
		}
		return "", ""
	}
	u := Upstream{Setting: UpstreamEnv}
	var sources []string
	if n, v := first("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"); n != "" {
		p, err := parseProxyURL(n, v, true)
		if err != nil {
			return Upstream{}, err
		}
		u.Connect = p
		sources = append(sources, n)
	}
	if n, v := first("http_proxy", "HTTP_PROXY"); n != "" {
		p, err := parseProxyURL(n, v, true)
		if err != nil {
			return Upstream{}, err
		}
		u.HTTP = p
		if !strings.Contains(strings.Join(sources, ","), n) {
			sources = append(sources, n)
		}
	}
	if u.Connect == nil && u.HTTP == nil {
		return u, nil
	}
	u.Source = strings.Join(sources, ", ")
	if _, v := first("no_proxy", "NO_PROXY"); v != "" {
		for _, e := range strings.Split(v, ",") {
			if e = strings.ToLower(strings.TrimSpace(e)); e != "" {
				u.NoProxy = append(u.NoProxy, e)
			}
		}
	}
	return u, nil
}

// redacted is a proxy URL without its password.
func redacted(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	// Not parsed, or parsed with no user because the password holds a
	// '/', '#', '?' or a bad escape: everything up to the last '@' may be
	// the password, so none of it is shown.
	if i := strings.LastIndex(s, "@"); i >= 0 {
		scheme := ""
		if j := strings.Index(s, "://"); j >= 0 && j < i {
			scheme = s[:j+3]
		}
		return scheme + s[i+1:]
	}
	return s
}

// parseProxyURL reads an upstream proxy's URL: http://[user:password@]host:port.
// From a variable (env), a URL without a scheme is http and the port
// defaults to 1080 as curl's does; the key itself must say both. The
// error never quotes the password.
func parseProxyURL(name, raw string, env bool) (*UpstreamProxy, error) {
	s := raw
	if env && !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%s: %q is not a proxy URL (write http://host:port or http://user:password@host:port, percent-encoding @ : / # ? %% and spaces in the user and the password)", name, redacted(raw))
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("%s: %q: the upstream proxy must be http:// (cco speaks HTTP CONNECT to it; %s:// is not supported)%s", name, redacted(raw), u.Scheme, envFix(name, env))
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%s: %q: a proxy URL has no path or query (write http://host:port)%s", name, redacted(raw), envFix(name, env))
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		if !env {
			return nil, fmt.Errorf("%s: %q names no port (write http://%s:PORT)", name, redacted(raw), u.Host)
		}
		port = "1080"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("%s: %q: %q is not a port (1-65535)%s", name, redacted(raw), port, envFix(name, env))
	}
	if _, err := netip.ParseAddr(host); err != nil && !ValidName(strings.ToLower(host)) {
		return nil, fmt.Errorf("%s: %q: %q is not a host name or address%s", name, redacted(raw), host, envFix(name, env))
	}
	p := &UpstreamProxy{Addr: net.JoinHostPort(strings.ToLower(host), port)}
	if u.User != nil {
		p.User = u.User.Username()
		p.Password, _ = u.User.Password()
	}
	return p, nil
}

func envFix(name string, env bool) string {
	if !env {
		return ""
	}
	return fmt.Sprintf(" (fix: correct %s, or set egress_upstream = \"none\" or an http:// URL in /etc/cco/sandbox.toml)", name)
}

// Direct reports whether host (lower case, as the client named it) is
// one no_proxy names, as curl matches it: "*" is every host; a name
// matches itself and the names below it (a leading dot is ignored); an
// address or CIDR matches an address literal within it.
func (u Upstream) Direct(host string) bool {
	host = strings.TrimSuffix(strings.Trim(strings.ToLower(host), "[]"), ".")
	a, aerr := netip.ParseAddr(host)
	for _, e := range u.NoProxy {
		e = strings.TrimSuffix(strings.TrimPrefix(e, "."), ".")
		if e == "*" {
			return true
		}
		if aerr == nil {
			e = strings.Trim(e, "[]")
			if pfx, err := netip.ParsePrefix(e); err == nil && pfx.Contains(a.Unmap()) {
				return true
			}
			if b, err := netip.ParseAddr(e); err == nil && b.Unmap() == a.Unmap() {
				return true
			}
			continue
		}
		if host == e || strings.HasSuffix(host, "."+e) {
			return true
		}
	}
	return false
}

// For is the upstream a request goes through: CONNECT's (connect) or
// plain http's, nil when the destination is dialled directly.
func (u Upstream) For(host string, connect bool) *UpstreamProxy {
	p := u.HTTP
	if connect {
		p = u.Connect
	}
	if p == nil || u.Direct(host) {
		return nil
	}
	return p
}

// Describe is the upstream in effect, for status and the summary line:
// no credentials.
func (u Upstream) Describe() string {
	if u.Connect == nil && u.HTTP == nil {
		if u.Setting == UpstreamNone {
			return "direct (egress_upstream = \"none\")"
		}
		return "direct (no proxy variable set)"
	}
	var parts []string
	via := func(what string, p *UpstreamProxy) string {
		s := what + " via " + p.Addr
		if p.User != "" || p.Password != "" {
			s += " with Basic credentials"
		}
		return s
	}
	if u.Connect != nil {
		parts = append(parts, via("CONNECT", u.Connect))
	}
	if u.HTTP != nil {
		parts = append(parts, via("http", u.HTTP))
	}
	s := strings.Join(parts, ", ") + " (from " + u.Source + ")"
	if len(u.NoProxy) > 0 {
		s += fmt.Sprintf(", %d no_proxy entries direct", len(u.NoProxy))
	}
	return s
}
