package agent

// BaseURLs are where an agent reads the base URL of its own model
// provider: a gateway there on the host's loopback (LiteLLM's
// http://127.0.0.1:4000) is carried into that agent's jail on the same
// port (docs/adr/0131-host-loopback-ports.md). Env are variables;
// TOMLFile is a home-relative TOML file with TOMLKeys, dotted paths where
// "*" stands for any table name. Kept apart from the profiles' table, one
// entry per agent; TestBaseURLsEveryAgent holds it to Names().
type BaseURLs struct {
	Env      []string
	TOMLFile string
	TOMLKeys []string
	// Vendor is the vendor's documentation of the setting.
	Vendor string
}

var baseURLs = map[string]BaseURLs{
	"claude": {Env: []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL"},
		Vendor: "https://docs.anthropic.com/en/docs/claude-code/llm-gateway"},
	// Codex 0.169 ignores OPENAI_BASE_URL: the base URL is config.toml's.
	"codex": {TOMLFile: ".codex/config.toml", TOMLKeys: []string{"openai_base_url", "model_providers.*.base_url"},
		Vendor: "https://github.com/openai/codex/blob/main/docs/config.md"},
	"gemini": {Env: []string{"GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL"},
		Vendor: "https://github.com/google-gemini/gemini-cli/blob/main/docs/get-started/configuration.md"},
	"copilot": {Env: []string{"COPILOT_PROVIDER_BASE_URL"},
		Vendor: "https://docs.github.com/en/copilot/how-tos/use-copilot-agents/use-copilot-cli"},
	// OpenCode, Droid and Pi keep their providers' URLs in JSON settings
	// that can name many providers: host_ports opens a gateway's port.
	"opencode": {},
	"droid":    {},
	"pi":       {},
}

// BaseURLSources are where the agent name reads its provider's base URL
// (the zero value for an agent with none cco reads).
func BaseURLSources(name string) BaseURLs { return baseURLs[name] }
