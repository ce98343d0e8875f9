// Package policy is the jail's network policy as sandbox.toml states it:
// the modes, the shipped allowlists, the parsing and validation of the
// egress keys, the rules the proxy matches with, and the audit log's files.
// It is apart from the proxy (package egress, which needs net/http) so that
// the shadow, which parses the policy at every launch, starts without
// linking an HTTP stack; the egress-proxy process receives the parsed
// Policy as JSON (Encode, Decode).
package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	agentpkg "github.com/cco-dev/cco/agent"
)

// Policy modes (the sandbox.toml key egress).
const (
	ModePublic    = "public"
	ModeAllowlist = "allowlist"
	ModeOff       = "off"
)

// DefaultPorts are the egress_ports when the key is not set.
var DefaultPorts = []int{80, 443}

// Policy is what the proxy enforces.
type Policy struct {
	Mode      string         // "public" (default) | "allowlist" | "off"
	Allow     []string       // egress_allow: domains and "*.suffix" wildcards (allowlist mode)
	AllowHost []string       // allow_host: names exempt from the address check
	AllowIP   []netip.Prefix // allow_ip: addresses/CIDRs exempt from the address check
	Ports     []int          // egress_ports, default [80, 443]
	// LogPath is egress_log: the audit log the host side writes
	// (default ~/.local/state/cco/egress.log).
	LogPath string
	// Upstream is egress_upstream resolved (ResolveUpstream): the proxy
	// an allowed request is forwarded through, after this policy decided.
	Upstream Upstream
	// HostPorts are the host's loopback ports the jail reaches on its own
	// loopback: host_ports and the port of the agent's own endpoint on
	// the host's loopback (docs/adr/0131-host-loopback-ports.md).
	HostPorts []int `json:",omitempty"`
	// SSHHosts are the hosts port 22 is allowed to, whatever
	// egress_ports and the allowlist say: ssh_hosts, with ssh_agent on
	// (docs/adr/0132-ssh-through-the-egress-proxy.md).
	SSHHosts []string `json:",omitempty"`
}

// Keys are the sandbox.toml keys Parse reads; others are ignored.
var Keys = []string{"egress", "egress_allow", "allow_host", "allow_ip", "egress_ports", "egress_log", "egress_upstream", "host_ports", "ssh_hosts"}

// commonAllow is what every agent needs besides its vendor: package
// registries and forges.
var commonAllow = []string{
	// forges
	"github.com", "*.github.com", "*.githubusercontent.com", "gitlab.com", "*.gitlab.com",
	"bitbucket.org", "codeberg.org",
	// package registries
	"registry.npmjs.org", "registry.yarnpkg.com",
	"pypi.org", "files.pythonhosted.org",
	"proxy.golang.org", "sum.golang.org", "index.golang.org",
	"crates.io", "index.crates.io", "static.crates.io",
	"rubygems.org", "index.rubygems.org",
	"repo.maven.apache.org", "repo1.maven.org",
	"deb.debian.org", "security.debian.org",
}

// DefaultAllow is the shipped allowlist for an agent: its vendor's
// endpoints (the profile's Egress), its login endpoints (so that a
// paste-code or device login works in allowlist mode too), plus package
// registries and forges. An unknown agent gets only the registries and
// forges.
func DefaultAllow(name string) []string {
	var out []string
	if p, ok := agentpkg.Lookup(name); ok {
		out = slices.Clone(p.Egress)
		for _, h := range p.LoginEndpoints {
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return append(out, commonAllow...)
}

// Parse builds a Policy from the top-level table of /etc/cco/sandbox.toml
// as any TOML decoder returns it (strings, int64 or int, and []any or typed
// slices). agent picks the default allowlist; home expands egress_log's
// default and a leading "~/". A bad value is an error naming the key and the
// fix. egress_allow, when set, replaces the defaults; allow_host and allow_ip
// add to whatever mode is in force.
func Parse(keys map[string]any, agent, home string) (Policy, error) {
	if !agentpkg.Known(agent) {
		return Policy{}, fmt.Errorf("egress: unknown agent %q (known: %s)", agent, strings.Join(agentpkg.Names(), ", "))
	}
	p := Policy{Mode: ModePublic, Ports: slices.Clone(DefaultPorts)}
	if v, ok := keys["egress"]; ok {
		s, ok := v.(string)
		if !ok {
			return Policy{}, fmt.Errorf("egress: want a string (public, allowlist or off), got %T", v)
		}
		switch s {
		case ModePublic, ModeAllowlist, ModeOff:
			p.Mode = s
		default:
			return Policy{}, fmt.Errorf("egress: %q is not one of public, allowlist, off", s)
		}
	}
	p.Allow = DefaultAllow(agent)
	if v, ok := keys["egress_allow"]; ok {
		list, err := stringList("egress_allow", v)
		if err != nil {
			return Policy{}, err
		}
		if p.Allow, err = hostRules("egress_allow", list); err != nil {
			return Policy{}, err
		}
	}
	if v, ok := keys["allow_host"]; ok {
		list, err := stringList("allow_host", v)
		if err != nil {
			return Policy{}, err
		}
		if p.AllowHost, err = hostRules("allow_host", list); err != nil {
			return Policy{}, err
		}
	}
	if v, ok := keys["allow_ip"]; ok {
		list, err := stringList("allow_ip", v)
		if err != nil {
			return Policy{}, err
		}
		for _, s := range list {
			pfx, err := parseAllowIP(s)
			if err != nil {
				return Policy{}, err
			}
			p.AllowIP = append(p.AllowIP, pfx)
		}
	}
	if v, ok := keys["egress_ports"]; ok {
		ports, err := portList(v)
		if err != nil {
			return Policy{}, err
		}
		p.Ports = ports
	}
	if v, ok := keys["egress_upstream"]; ok {
		s, ok := v.(string)
		if !ok {
			return Policy{}, fmt.Errorf("egress_upstream: want a string (\"env\", \"none\" or \"http://host:port\"), got %T", v)
		}
		if err := ParseUpstreamSetting(s); err != nil {
			return Policy{}, err
		}
		p.Upstream.Setting = s
	}
	if v, ok := keys["ssh_hosts"]; ok {
		list, err := stringList("ssh_hosts", v)
		if err != nil {
			return Policy{}, err
		}
		for _, h := range list {
			if strings.HasPrefix(h, "*") {
				return Policy{}, fmt.Errorf("ssh_hosts: %q: name each host (\"github.com\"), no wildcard", h)
			}
		}
		if p.SSHHosts, err = hostRules("ssh_hosts", list); err != nil {
			return Policy{}, err
		}
	}
	if v, ok := keys["host_ports"]; ok {
		ports, err := HostPortList(v)
		if err != nil {
			return Policy{}, err
		}
		p.HostPorts = ports
	}
	var err error
	if p.LogPath, err = logPath(keys["egress_log"], home); err != nil {
		return Policy{}, err
	}
	return p, nil
}

func stringList(key string, v any) ([]string, error) {
	switch l := v.(type) {
	case []string:
		return l, nil
	case []any:
		out := make([]string, 0, len(l))
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("%s[%d]: want a string, got %T (%v)", key, i, e, e)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: want a list of strings, got %T", key, v)
}

// hostRules validates names and "*.suffix" wildcards and normalises them
// (lower case, no trailing dot).
func hostRules(key string, list []string) ([]string, error) {
	out := make([]string, 0, len(list))
	for _, raw := range list {
		s := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(raw)), ".")
		name := strings.TrimPrefix(s, "*.")
		switch {
		case s == "" || s == "*":
			return nil, fmt.Errorf("%s: %q matches everything; use egress = \"public\" instead", key, raw)
		case strings.Contains(s, "://") || strings.ContainsAny(s, "/:"):
			return nil, fmt.Errorf("%s: %q is not a host name; write only the name (\"example.com\"), ports go in egress_ports", key, raw)
		case isIPLiteral(name):
			return nil, fmt.Errorf("%s: %q is an address; put addresses in allow_ip", key, raw)
		case strings.Contains(name, "*"):
			return nil, fmt.Errorf("%s: %q: a wildcard is allowed only as a leading \"*.\"", key, raw)
		case !ValidName(name):
			return nil, fmt.Errorf("%s: %q is not a valid host name", key, raw)
		case name != s && !strings.Contains(name, "."):
			return nil, fmt.Errorf("%s: %q covers a whole top-level domain; name a registered domain (\"*.example.com\")", key, raw)
		}
		out = append(out, s)
	}
	return out, nil
}

func isIPLiteral(s string) bool {
	_, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return err == nil
}

// ValidName reports whether s is a syntactically valid host name. A name
// whose last label is a number is none: inet_aton, the WHATWG URL parser
// and an upstream proxy's getaddrinfo read 127.1, 2130706433 and
// 0x7f000001 as IPv4 addresses, which Go's resolver does not, so such a
// "name" would reach the upstream unchecked.
func ValidName(s string) bool {
	if len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	if EndsInNumber(labels[len(labels)-1]) {
		return false
	}
	for _, label := range labels {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// EndsInNumber reports whether label, a host's last, is a number to the
// WHATWG URL parser: decimal digits, or 0x and hexadecimal digits.
func EndsInNumber(label string) bool {
	l := strings.ToLower(label)
	digits := "0123456789"
	if strings.HasPrefix(l, "0x") {
		l, digits = l[2:], "0123456789abcdef"
		if l == "" {
			return true
		}
	}
	if l == "" {
		return false
	}
	for _, c := range l {
		if !strings.ContainsRune(digits, c) {
			return false
		}
	}
	return true
}

func parseAllowIP(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("allow_ip: %q is not an address or CIDR: %w", s, err)
		}
		if pfx.Addr().Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("allow_ip: %q: zones are not allowed", s)
		}
		if m := pfx.Masked(); m != pfx {
			return netip.Prefix{}, fmt.Errorf("allow_ip: %q has host bits set; did you mean %s?", s, m)
		}
		pfx = UnmapPrefix(pfx)
		// A connect to 0.0.0.0 or :: reaches the host itself: as loopback.
		if pfx.Overlaps(loopback4) || pfx.Overlaps(loopback6) || pfx.Contains(unspecified4) || pfx.Contains(unspecified6) {
			return netip.Prefix{}, loopbackAllowIP(s)
		}
		return pfx, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("allow_ip: %q is not an address or CIDR (\"10.1.2.3\", \"10.1.0.0/16\", \"fd00::/8\")", s)
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("allow_ip: %q: zones are not allowed", s)
	}
	a = a.Unmap()
	if a.IsLoopback() || a.IsUnspecified() {
		return netip.Prefix{}, loopbackAllowIP(s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

var (
	loopback4 = netip.MustParsePrefix("127.0.0.0/8")
	loopback6 = netip.MustParsePrefix("::1/128")
	// unspecified4 and unspecified6 are 0.0.0.0 and ::, which Linux
	// connects to the host's own loopback.
	unspecified4 = netip.IPv4Unspecified()
	unspecified6 = netip.IPv6Unspecified()
)

// loopbackAllowIP is the refusal of an allow_ip entry in the loopback
// range: the proxy's loopback is the host's, and the jail's is its own;
// host_ports opens one host loopback port at a time.
func loopbackAllowIP(s string) error {
	return fmt.Errorf("allow_ip: %q is or holds a loopback address (0.0.0.0 and :: connect to loopback too): the jail's 127.0.0.1 is its own, not the host's; to reach a service on the host's loopback, list its port in host_ports (host_ports = [4000]) and use http://127.0.0.1:PORT in the jail", s)
}

// UnmapPrefix turns ::ffff:10.0.0.0/104 into 10.0.0.0/8, so that the hole
// matches the unmapped addresses the proxy compares against.
func UnmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

func portList(v any) ([]int, error) {
	var raw []any
	switch l := v.(type) {
	case []any:
		raw = l
	case []int:
		for _, e := range l {
			raw = append(raw, e)
		}
	case []int64:
		for _, e := range l {
			raw = append(raw, e)
		}
	default:
		return nil, fmt.Errorf("egress_ports: want a list of port numbers, got %T", v)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("egress_ports: the list is empty; to cut the network use egress = \"off\"")
	}
	out := make([]int, 0, len(raw))
	for i, e := range raw {
		var n int64
		switch x := e.(type) {
		case int:
			n = int64(x)
		case int64:
			n = x
		default:
			return nil, fmt.Errorf("egress_ports[%d]: want a port number, got %T (%v)", i, e, e)
		}
		if n < 1 || n > 65535 {
			return nil, fmt.Errorf("egress_ports[%d]: %d is not a port (1-65535)", i, n)
		}
		if !slices.Contains(out, int(n)) {
			out = append(out, int(n))
		}
	}
	return out, nil
}

// EndpointPort is the port of the agent's proxy endpoint on the jail's
// own loopback (spawn.Endpoint): no host port may take it.
const EndpointPort = 3128

// HostPortList reads host_ports: the host loopback ports the jail reaches
// on the same port of its own loopback. An empty list is no port.
func HostPortList(v any) ([]int, error) {
	if l, ok := v.([]any); ok && len(l) == 0 {
		return nil, nil
	}
	if l, ok := v.([]int); ok && len(l) == 0 {
		return nil, nil
	}
	if l, ok := v.([]int64); ok && len(l) == 0 {
		return nil, nil
	}
	ports, err := portList(v)
	if err != nil {
		return nil, fmt.Errorf("host_ports%s", strings.TrimPrefix(err.Error(), "egress_ports"))
	}
	for i, n := range ports {
		if n == EndpointPort {
			return nil, fmt.Errorf("host_ports[%d]: %d is the jail's own proxy endpoint (127.0.0.1:%d in the jail); a host service on it cannot be carried in (fix: move the service to another port)", i, n, n)
		}
	}
	return ports, nil
}

// AddHostPort adds port to HostPorts (once).
func (p *Policy) AddHostPort(port int) {
	if port > 0 && port < 65536 && port != EndpointPort && !slices.Contains(p.HostPorts, port) {
		p.HostPorts = append(p.HostPorts, port)
	}
}

func logPath(v any, home string) (string, error) {
	s := ""
	if v != nil {
		var ok bool
		if s, ok = v.(string); !ok {
			return "", fmt.Errorf("egress_log: want a path string, got %T", v)
		}
	}
	if s == "" {
		s = "~/.local/state/cco/egress.log"
	}
	if rest, ok := strings.CutPrefix(s, "~/"); ok {
		if home == "" || !filepath.IsAbs(home) {
			return "", fmt.Errorf("egress_log: %q needs the home directory, and %q is not an absolute path", s, home)
		}
		s = filepath.Join(home, rest)
	}
	if !filepath.IsAbs(s) {
		return "", fmt.Errorf("egress_log: %q is not absolute; write an absolute path or one starting with ~/", s)
	}
	return filepath.Clean(s), nil
}

// MatchRule reports whether host (normalised) matches a rule: an exact name,
// or "*.suffix", which matches names below suffix but not suffix itself.
func MatchRule(rules []string, host string) bool {
	for _, r := range rules {
		if suffix, ok := strings.CutPrefix(r, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if host == r {
			return true
		}
	}
	return false
}

// OffBanner is what a launch with egress = "off" must print, every time.
func OffBanner() string {
	return "" +
		"************************************************************************\n" +
		"*  cco: EGRESS IS OFF (egress = \"off\" in /etc/cco/sandbox.toml)        *\n" +
		"*  This session has NO NETWORK at all: no vendor API, no registries,   *\n" +
		"*  no forges. The agent will fail to reach its service.                *\n" +
		"*  To restore it, set egress = \"public\" or \"allowlist\".                *\n" +
		"************************************************************************\n"
}

// Summary is the one-line description of a policy for status output.
func (p Policy) Summary() string {
	var s string
	switch p.EffectiveMode() {
	case ModeOff:
		return "egress off: no network in the jail"
	case ModeAllowlist:
		s = fmt.Sprintf("egress allowlist: %d rules, %d allow_host, %d allow_ip, ports %v",
			len(p.Allow), len(p.AllowHost), len(p.AllowIP), p.EffectivePorts())
	default:
		s = fmt.Sprintf("egress public: any globally routable destination, %d allow_host, %d allow_ip, ports %v",
			len(p.AllowHost), len(p.AllowIP), p.EffectivePorts())
	}
	if len(p.HostPorts) > 0 {
		s += fmt.Sprintf(", host loopback ports %v", p.HostPorts)
	}
	return s + "; upstream: " + p.Upstream.Describe()
}

// EffectiveMode is Mode with the zero value read as public.
func (p Policy) EffectiveMode() string {
	if p.Mode == "" {
		return ModePublic
	}
	return p.Mode
}

// EffectivePorts is Ports with the zero value read as DefaultPorts.
func (p Policy) EffectivePorts() []int {
	if len(p.Ports) == 0 {
		return DefaultPorts
	}
	return p.Ports
}

// Validate checks a Policy built by hand, or received from another
// process (Parse's output always passes).
func (p Policy) Validate() error {
	switch p.EffectiveMode() {
	case ModePublic, ModeAllowlist:
	case ModeOff:
		return fmt.Errorf("egress is off: the jail gets no network and no proxy runs")
	default:
		return fmt.Errorf("egress: mode %q is not one of public, allowlist, off", p.Mode)
	}
	for _, n := range p.EffectivePorts() {
		if n < 1 || n > 65535 {
			return fmt.Errorf("egress_ports: %d is not a port (1-65535)", n)
		}
	}
	return nil
}

// SocketName is the proxy's unix socket inside its runtime directory.
const SocketName = "egress.sock"

// The egress-proxy process's protocol (package egress, ServeProcess, says
// it whole): what it says on standard output, and the descriptors it is
// handed beside the policy on standard input.
const (
	// ReadyLine is its first line once it serves; ErrorPrefix starts one
	// that says why it cannot.
	ReadyLine   = "ready"
	ErrorPrefix = "error: "
	// SummaryPrefix starts its last line, the session's destinations
	// (package tally's JSON), said once its input has ended.
	SummaryPrefix = "summary: "
	// ListenerFD is the listening socket; AuditLockFD and AuditLogFD are
	// the audit log's lock and file (OpenLog).
	ListenerFD  = 3
	AuditLockFD = 4
	AuditLogFD  = 5
	// EndpointsFD is a unix socket on which the shadow hands over the
	// agent's endpoint, a listening TCP socket, one per message
	// (SCM_RIGHTS); the process answers EndpointServed once it serves
	// it. A shadow that hands over nothing need not pass it.
	EndpointsFD    = 6
	EndpointServed = 'k'
	// EndpointProxy and EndpointHostPort are each message's one byte:
	// the agent's proxy endpoint, or a listener on one of HostPorts,
	// whose connections go to the host's loopback on its port.
	EndpointProxy    = 'e'
	EndpointHostPort = 'h'
)

// Encode is the policy as the proxy process receives it: one line of JSON.
func (p Policy) Encode() ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding the egress policy: %w", err)
	}
	return append(b, '\n'), nil
}

// Decode reads a policy written by Encode and validates it: the proxy
// enforces only a policy that could have come from Parse.
func Decode(line []byte) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("decoding the egress policy: %w", err)
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	for _, list := range [][]string{p.Allow, p.AllowHost, p.SSHHosts} {
		for _, r := range list {
			if !ValidName(strings.TrimPrefix(r, "*.")) {
				return Policy{}, fmt.Errorf("decoding the egress policy: %q is not a host rule", r)
			}
		}
	}
	if !filepath.IsAbs(p.LogPath) {
		return Policy{}, fmt.Errorf("decoding the egress policy: egress_log %q is not absolute", p.LogPath)
	}
	for _, u := range []*UpstreamProxy{p.Upstream.Connect, p.Upstream.HTTP} {
		if u == nil {
			continue
		}
		if _, port, err := net.SplitHostPort(u.Addr); err != nil || port == "" {
			return Policy{}, fmt.Errorf("decoding the egress policy: upstream %q is not host:port", u.Addr)
		}
	}
	for _, n := range p.HostPorts {
		if n < 1 || n > 65535 || n == EndpointPort {
			return Policy{}, fmt.Errorf("decoding the egress policy: host port %d", n)
		}
	}
	return p, nil
}

// OpenLog opens (creating them and their directory, modes 0700/0600) the
// audit log at LogPath and its rotation lock, LogPath + ".lock". The shadow
// opens them before the jail is built, so that a log that cannot be written
// stops the launch, and hands both to the proxy process.
func (p Policy) OpenLog() (lock, log *os.File, err error) {
	path := p.LogPath
	if !filepath.IsAbs(path) {
		return nil, nil, fmt.Errorf("egress audit log %q: not an absolute path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("egress audit log: creating %s: %w", filepath.Dir(path), err)
	}
	lock, err = os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("egress audit log: opening %s.lock: %w", path, err)
	}
	if log, err = OpenLogFile(path); err != nil {
		lock.Close()
		return nil, nil, err
	}
	return lock, log, nil
}

// OpenLogFile opens the audit log file itself for appending (again after a
// rotation).
func OpenLogFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("egress audit log: opening %s: %w", path, err)
	}
	return f, nil
}
