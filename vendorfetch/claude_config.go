package vendorfetch

import "fmt"

// ClaudeStoreURL is Claude Code's release store (claude.base_url's default).
const ClaudeStoreURL = "https://downloads.claude.ai/claude-code-releases"

// validate checks Claude Code's keys (claude.*) and names the one at fault.
func (c ClaudeConfig) validate(explicit map[string]bool) error {
	if err := checkSource("claude.source", c.Source); err != nil {
		return err
	}
	if err := checkPinOrChannel(AgentClaude, c.Version, c.Channel, storeChannels(c.Source, "stable", "latest"), explicit); err != nil {
		return err
	}
	if err := checkURL("claude.base_url", c.BaseURL, false); err != nil {
		return err
	}
	if err := checkURL("claude.registry", c.Registry, false); err != nil {
		return err
	}
	if c.SigningFingerprint != "" && !fingerprintRE.MatchString(c.SigningFingerprint) {
		return fmt.Errorf("claude.signing_fingerprint: %q is not a 40- or 64-digit hex fingerprint", c.SigningFingerprint)
	}
	return nil
}
