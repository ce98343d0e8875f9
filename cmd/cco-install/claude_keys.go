package main

import (
	"github.com/cco-dev/cco/managed"
	"github.com/cco-dev/cco/vendorfetch"
)

// Claude Code's install.toml keys, their defaults from vendorfetch and
// managed (the homes of those defaults), and where they go.
func init() {
	d := vendorDefaults.Claude
	keys = append(keys,
		key{"claude.channel", "", "", "Claude Code release channel (stable when no version is pinned)"},
		key{"claude.version", "", "", "pinned Claude Code version"},
		key{"claude.base_url", d.BaseURL, "", "Claude Code release store"},
		key{"claude.signing_key", "", "", "armored OpenPGP public key file for manifest signatures"},
		key{"claude.signing_fingerprint", d.SigningFingerprint, "", "the expected fingerprint of claude.signing_key"},
		key{"claude.managed_file", managed.ClaudeDropin, "", "dropin (managed-settings.d/50-cco.json) or base (managed-settings.json)"},
		key{"claude.source", d.Source, "", "where Claude Code comes from: store (claude.base_url) or npm (claude.registry)"},
		key{"claude.registry", d.Registry, "", "npm registry of " + vendorfetch.NpmClaude + " when claude.source is npm"},
	)
	keyChoices["claude.managed_file"] = []string{managed.ClaudeDropin, managed.ClaudeBase}
	vendorKeyMaps = append(vendorKeyMaps, claudeVendorConfig)
}

// claudeVendorConfig maps the claude.* keys onto vendorfetch's settings.
// The channel's default is vendorfetch's: none when a version is pinned,
// else the store's stable or npm's latest by source.
func claudeVendorConfig(cfg *Config, v *vendorfetch.Config) {
	v.Claude.Channel, v.Claude.Version = cfg.String("claude.channel"), cfg.String("claude.version")
	v.Claude.BaseURL, v.Claude.SigningKey = cfg.String("claude.base_url"), cfg.String("claude.signing_key")
	v.Claude.SigningFingerprint = cfg.String("claude.signing_fingerprint")
	v.Claude.Source, v.Claude.Registry = cfg.String("claude.source"), cfg.String("claude.registry")
}

// claudeManagedFile is which of Claude Code's managed settings files cco
// writes (claude.managed_file).
func claudeManagedFile(cfg *Config) string { return cfg.String("claude.managed_file") }
