package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// allowlistWarnings are status's warnings for an allowlist that leaves
// out an installed agent's own endpoints: egress = "allowlist" with an
// egress_allow of the operator's, which replaces the shipped list, and
// neither it nor allow_host names a host of the agent's profile (its
// Egress). One line per agent, naming it and each host it cannot reach.
func allowlistWarnings(root *provision.Root, agents []agentLine) []string {
	b, err := root.ReadFile(sandbox.ConfigPath)
	if err != nil {
		return nil
	}
	c, err := sandbox.ParseConfig(b, sandbox.ConfigPath)
	if err != nil || c.Egress != policy.ModeAllowlist || c.EgressAllow == nil {
		return nil
	}
	rules := slices.Concat(c.EgressAllow, c.AllowHost)
	var out []string
	for _, a := range agents {
		p, ok := agent.Lookup(a.Agent)
		if !ok || a.Version == "" {
			continue
		}
		var missing []string
		for _, h := range p.Egress {
			probe := h
			if suffix, ok := strings.CutPrefix(h, "*."); ok {
				// A name below the wildcard's suffix stands for it.
				probe = "a." + suffix
			}
			if !slices.Contains(rules, h) && !policy.MatchRule(rules, probe) {
				missing = append(missing, h)
			}
		}
		if len(missing) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s is installed, and egress_allow in %s leaves out its own endpoints %s: in allowlist mode %s cannot reach them (fix: add them to egress_allow, or remove egress_allow to allow the shipped list)",
			a.Agent, sandbox.ConfigPath, strings.Join(missing, ", "), a.Agent))
	}
	return out
}
