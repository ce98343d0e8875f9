package vendorfetch

import "fmt"

// Codex's release stores: the primary one (codex.base_urls' default) and
// the GitHub-layout fallback (codex.github_base_url, codex.github_api_url).
const (
	CodexStoreURL      = "https://releases.openai.com/codex"
	CodexGitHubBaseURL = "https://github.com/openai/codex/releases/download"
	CodexGitHubAPIURL  = "https://api.github.com/repos/openai/codex/releases/latest"
)

// validate checks Codex's keys (codex.*) and names the one at fault.
func (c CodexConfig) validate(explicit map[string]bool) error {
	if err := checkSource("codex.source", c.Source); err != nil {
		return err
	}
	if err := checkPinOrChannel(AgentCodex, c.Version, c.Channel, storeChannels(c.Source, "latest"), explicit); err != nil {
		return err
	}
	for i, u := range c.BaseURLs {
		if err := checkURL(fmt.Sprintf("codex.base_urls[%d]", i), u, false); err != nil {
			return err
		}
	}
	if err := checkURL("codex.github_base_url", c.GitHubBaseURL, true); err != nil {
		return err
	}
	if err := checkURL("codex.github_api_url", c.GitHubAPIURL, true); err != nil {
		return err
	}
	return checkURL("codex.registry", c.Registry, false)
}
