package main

import "github.com/cco-dev/cco/vendorfetch"

// The keys of the vendor step's npm sources, with their defaults from
// vendorfetch (the one home of the vendor defaults).
func init() {
	d := vendorfetch.DefaultConfig()
	keys = append(keys,
		key{"claude.source", d.Claude.Source, "", "where Claude Code comes from: store (claude.base_url) or npm (claude.registry)"},
		key{"claude.registry", d.Claude.Registry, "", "npm registry of " + vendorfetch.NpmClaude + " when claude.source is npm"},
		key{"codex.source", d.Codex.Source, "", "where Codex comes from: store (codex.base_urls, then GitHub) or npm (codex.registry)"},
		key{"codex.registry", d.Codex.Registry, "", "npm registry of " + vendorfetch.NpmCodex + " when codex.source is npm"},
		key{"gemini.registry", d.Gemini.Registry, "", "npm registry of " + vendorfetch.NpmGemini},
		key{"gemini.channel", "", "", "Gemini CLI dist-tag: latest, preview or nightly (latest when no version is pinned)"},
		key{"gemini.version", "", "", "pinned Gemini CLI version"},
		key{"gemini.node", d.Gemini.Node, "", "the Node binary that runs Gemini CLI: a name on the system PATH or an absolute path"},
		key{"npm_keys", "", "", "file of a private npm registry's signing keys (its /-/npm/v1/keys answer), trusted besides the public registry's"},
	)
}

// vendorNpmConfig maps the npm sources' keys onto vendorfetch's settings.
func vendorNpmConfig(cfg *Config, v *vendorfetch.Config) {
	v.Claude.Source, v.Claude.Registry = cfg.String("claude.source"), cfg.String("claude.registry")
	v.Codex.Source, v.Codex.Registry = cfg.String("codex.source"), cfg.String("codex.registry")
	v.Gemini.Registry, v.Gemini.Channel, v.Gemini.Version = cfg.String("gemini.registry"), cfg.String("gemini.channel"), cfg.String("gemini.version")
	v.Gemini.Node, v.NpmKeys = cfg.String("gemini.node"), cfg.String("npm_keys")
	// Defaults are vendorfetch's: a channel only when no version is
	// pinned, and the store's stable or npm's latest by source.
	v.Claude.Channel, v.Codex.Channel = cfg.String("claude.channel"), cfg.String("codex.channel")
	for _, k := range []string{"claude.channel", "claude.version", "codex.channel", "codex.version", "gemini.channel", "gemini.version"} {
		v.Explicit[k] = cfg.IsSet(k)
	}
}
