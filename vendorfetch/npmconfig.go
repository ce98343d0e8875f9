package vendorfetch

import (
	"fmt"
	"strings"
)

// validate checks an npm-only agent's keys (<agent>.registry, .channel,
// .version and, for a Node program, .node) and names the one at fault.
func (c NpmConfig) validate(agent string, explicit map[string]bool) error {
	// Any dist-tag is a channel.
	if err := checkPinOrChannel(agent, c.Version, c.Channel, nil, explicit); err != nil {
		return err
	}
	if err := checkURL(agent+".registry", c.Registry, false); err != nil {
		return err
	}
	if !npmLayoutOf(agent).node {
		if c.Node != "" {
			return fmt.Errorf("%s.node: %s is a native binary, run by no interpreter", agent, agent)
		}
		return nil
	}
	return checkNodeSetting(agent, c.Node)
}

// checkNodeSetting refuses a <agent>.node that is neither a command name
// nor an absolute path.
func checkNodeSetting(agent, n string) error {
	if n == "" || strings.ContainsAny(n, "\x00\n") || (strings.Contains(n, "/") && !strings.HasPrefix(n, "/")) {
		return fmt.Errorf("%s.node: %q is neither a command name (looked up on the system PATH) nor an absolute path", agent, n)
	}
	return nil
}
