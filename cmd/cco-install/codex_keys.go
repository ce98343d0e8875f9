package main

import "github.com/cco-dev/cco/vendorfetch"

// Codex's install.toml keys, their defaults from vendorfetch (the home of
// the vendor defaults), and where they go.
func init() {
	d := vendorDefaults.Codex
	keys = append(keys,
		key{"codex.channel", "", "", "Codex release channel (latest when no version is pinned)"},
		key{"codex.version", "", "", "pinned Codex version"},
		key{"codex.base_urls", d.BaseURLs, "", "Codex release stores, in order"},
		key{"codex.github_base_url", d.GitHubBaseURL, "", "GitHub-layout fallback downloads (empty disables)"},
		key{"codex.github_api_url", d.GitHubAPIURL, "", "GitHub API for the fallback's latest release (empty disables)"},
		key{"codex.source", d.Source, "", "where Codex comes from: store (codex.base_urls, then GitHub) or npm (codex.registry)"},
		key{"codex.registry", d.Registry, "", "npm registry of " + vendorfetch.NpmCodex + " when codex.source is npm"},
	)
	vendorKeyMaps = append(vendorKeyMaps, codexVendorConfig)
}

// codexVendorConfig maps the codex.* keys onto vendorfetch's settings.
func codexVendorConfig(cfg *Config, v *vendorfetch.Config) {
	v.Codex.Channel, v.Codex.Version = cfg.String("codex.channel"), cfg.String("codex.version")
	v.Codex.BaseURLs = cfg.List("codex.base_urls")
	v.Codex.GitHubBaseURL, v.Codex.GitHubAPIURL = cfg.String("codex.github_base_url"), cfg.String("codex.github_api_url")
	v.Codex.Source, v.Codex.Registry = cfg.String("codex.source"), cfg.String("codex.registry")
}
