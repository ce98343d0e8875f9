package sandbox

import (
	"fmt"

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
