package sandbox

import (
	"fmt"
	"strings"

	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// EgressDir is where, inside a jail, the egress proxy's socket is: a fixed
// path under the jail's private /run, so the in-jail helper finds the socket
// from the marker alone, and nothing the agent controls can point it
// elsewhere.
const EgressDir = "/run/cco/egress"

// EgressSocket is the proxy's socket as the in-jail helper sees it: the
// host's socket file, bound read-only.
const EgressSocket = EgressDir + "/" + policy.SocketName

// EgressPolicy turns sandbox.toml's egress keys into the proxy's policy for
// agent, expanding "~/" in egress_log against home. Only keys the file sets
// are passed on, so ParsePolicy's defaults apply to the rest; an error names
// the key, the file and the fix. environ is the invoking user's: the
// upstream proxy of egress_upstream = "env" comes from it, and with the
// agent's own config the port of its provider endpoint on the host's
// loopback, which joins host_ports.
func EgressPolicy(c *Config, agent, home string, environ []string) (policy.Policy, error) {
	keys := map[string]any{}
	if c.Egress != "" {
		keys["egress"] = c.Egress
	}
	// A key written as an empty list decodes to an empty, non-nil slice:
	// ParsePolicy decides whether that is allowed (egress_ports = [] is not).
	if c.EgressAllow != nil {
		keys["egress_allow"] = c.EgressAllow
	}
	if c.AllowHost != nil {
		keys["allow_host"] = c.AllowHost
	}
	if c.AllowIP != nil {
		keys["allow_ip"] = c.AllowIP
	}
	if c.EgressPorts != nil {
		keys["egress_ports"] = c.EgressPorts
	}
	if c.EgressLog != "" {
		keys["egress_log"] = c.EgressLog
	}
	if c.EgressUpstream != "" {
		keys["egress_upstream"] = c.EgressUpstream
	}
	if c.HostPorts != nil {
		keys["host_ports"] = c.HostPorts
	}
	if hosts := c.SSHHostList(); hosts != nil {
		keys["ssh_hosts"] = hosts
	}
	pol, err := policy.Parse(keys, agent, home)
	if err != nil {
		return policy.Policy{}, fmt.Errorf("%s: %w (fix that key in %s)", ConfigPath, err, ConfigPath)
	}
	if pol.EffectiveMode() == policy.ModeOff {
		return pol, nil
	}
	if pol.Upstream, err = policy.ResolveUpstream(pol.Upstream.Setting, environ); err != nil {
		return policy.Policy{}, fmt.Errorf("%s: %w", ConfigPath, err)
	}
	for _, n := range policy.AgentLoopbackPorts(agent, home, environ) {
		pol.AddHostPort(n)
	}
	return pol, nil
}

// JailConfig is sandbox.toml as the jail shows it, when egress_upstream
// names an upstream with credentials: the same text with that key's line
// made `egress_upstream = "env"`, so that the password is not readable in
// the jail (whatever its egress), and a launch nested there goes out
// through the jail's own proxy endpoint, which the environment names. ""
// when nothing needs hiding. A file whose key cannot be rewritten that
// way refuses the launch.
func JailConfig(raw []byte) (string, error) {
	c, err := ParseConfig(raw, ConfigPath)
	if err != nil {
		return "", err
	}
	up, err := policy.ResolveUpstream(c.EgressUpstream, nil)
	if err != nil || up.Source != "egress_upstream" || up.Connect.User == "" && up.Connect.Password == "" {
		return "", nil
	}
	lines := strings.SplitAfter(string(raw), "\n")
	n := 0
	for i, l := range lines {
		k, _, ok := strings.Cut(strings.TrimSpace(l), "=")
		if ok && strings.TrimSpace(k) == "egress_upstream" {
			lines[i] = "egress_upstream = \"env\" # the upstream's URL is the host's: its credentials stay there\n"
			n++
		}
	}
	out := strings.Join(lines, "")
	c, err = ParseConfig([]byte(out), ConfigPath)
	secret := up.Connect.Password
	if n != 1 || err != nil || c.EgressUpstream != policy.UpstreamEnv || secret != "" && strings.Contains(out, secret) {
		return "", fmt.Errorf("%s: egress_upstream's credentials cannot be kept out of the jail: write the key on one line of its own, as egress_upstream = \"http://USER:PASSWORD@HOST:PORT\"", ConfigPath)
	}
	return out, nil
}
