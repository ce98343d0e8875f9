// Package egress is the jail's network policy at work: a fail-closed,
// name-aware proxy on the host side of a jail that runs with its own empty
// network namespace (bwrap --unshare-net, only lo inside).
//
// The pieces, in the order a launch uses them:
//   - package policy turns the sandbox.toml keys (egress, egress_allow,
//     allow_host, allow_ip, egress_ports, egress_log) into a Policy; the
//     shadow does that at every launch, opens the audit log and the
//     listening socket, and starts the egress-proxy process on the
//     socket's first connection;
//   - ServeProcess is that process: it serves a Proxy on the inherited
//     socket (StartHost does the same in-process, for tests and benchmarks);
//   - package bridge, inside the jail, listens on 127.0.0.1 and carries each
//     connection to that socket; its ProxyEnv points the agent at it.
//
// The proxy resolves names itself, refuses every destination that is not
// globally routable unicast (or is one of the host's own addresses) unless
// allow_host/allow_ip punch a hole, and dials exactly the addresses it
// checked. Every decision lands in the AuditLog.
package egress

import (
	"context"
	"net"
	"net/netip"

	"github.com/cco-dev/cco/sandbox/egress/bridge"
	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// The policy and the bridge live in packages of their own, which the shadow
// and the in-jail helper link without this package's HTTP stack; these
// names keep the proxy's code and tests short.

// Policy is what the proxy enforces.
type Policy = policy.Policy

// Policy modes (the sandbox.toml key egress).
const (
	ModePublic    = policy.ModePublic
	ModeAllowlist = policy.ModeAllowlist
	ModeOff       = policy.ModeOff
)

// SocketName is the proxy's socket inside the runtime directory.
const SocketName = policy.SocketName

// DefaultPorts are the egress_ports when the key is not set.
var DefaultPorts = policy.DefaultPorts

// ParsePolicy is policy.Parse.
func ParsePolicy(keys map[string]any, agent, home string) (Policy, error) {
	return policy.Parse(keys, agent, home)
}

// DefaultAllow is policy.DefaultAllow.
func DefaultAllow(agent string) []string { return policy.DefaultAllow(agent) }

// OffBanner is policy.OffBanner.
func OffBanner() string { return policy.OffBanner() }

// Bridge is bridge.Bridge, the in-jail end.
type Bridge = bridge.Bridge

// StartBridge is bridge.Start.
func StartBridge(ctx context.Context, socketPath string) (*Bridge, error) {
	return bridge.Start(ctx, socketPath)
}

// ProxyEnv is bridge.ProxyEnv.
func ProxyEnv(addr netip.AddrPort) []string { return bridge.ProxyEnv(addr) }

func relay(a, b net.Conn) (aToB, bToA int64) { return bridge.Relay(a, b) }
