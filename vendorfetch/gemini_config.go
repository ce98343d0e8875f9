package vendorfetch

// validate checks Gemini CLI's keys (gemini.*) and names the one at fault.
func (c GeminiConfig) validate(explicit map[string]bool) error {
	// Any dist-tag is a channel.
	if err := checkPinOrChannel(AgentGemini, c.Version, c.Channel, nil, explicit); err != nil {
		return err
	}
	if err := checkURL("gemini.registry", c.Registry, false); err != nil {
		return err
	}
	return checkNodeSetting(AgentGemini, c.Node)
}
