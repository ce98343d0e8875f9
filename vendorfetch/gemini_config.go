package vendorfetch

import (
	"fmt"
	"strings"
)

// validate checks Gemini CLI's keys (gemini.*) and names the one at fault.
func (c GeminiConfig) validate(explicit map[string]bool) error {
	// Any dist-tag is a channel.
	if err := checkPinOrChannel(AgentGemini, c.Version, c.Channel, nil, explicit); err != nil {
		return err
	}
	if err := checkURL("gemini.registry", c.Registry, false); err != nil {
		return err
	}
	if n := c.Node; n == "" || strings.ContainsAny(n, "\x00\n") || (strings.Contains(n, "/") && !strings.HasPrefix(n, "/")) {
		return fmt.Errorf("gemini.node: %q is neither a command name (looked up on the system PATH) nor an absolute path", n)
	}
	return nil
}
