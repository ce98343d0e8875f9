package main

import "github.com/cco-dev/cco/vendorfetch"

// Gemini CLI's install.toml keys, their defaults from vendorfetch (the home
// of the vendor defaults), and where they go.
func init() {
	d := vendorDefaults.Gemini
	keys = append(keys,
		key{"gemini.registry", d.Registry, "", "npm registry of " + vendorfetch.NpmGemini},
		key{"gemini.channel", "", "", "Gemini CLI dist-tag: latest, preview or nightly (latest when no version is pinned)"},
		key{"gemini.version", "", "", "pinned Gemini CLI version"},
		key{"gemini.node", d.Node, "", "the Node binary that runs Gemini CLI: a name on the system PATH or an absolute path, linked beside the installed version"},
	)
	vendorKeyMaps = append(vendorKeyMaps, geminiVendorConfig)
}

// geminiVendorConfig maps the gemini.* keys onto vendorfetch's settings.
func geminiVendorConfig(cfg *Config, v *vendorfetch.Config) {
	v.Gemini.Registry, v.Gemini.Channel, v.Gemini.Version = cfg.String("gemini.registry"), cfg.String("gemini.channel"), cfg.String("gemini.version")
	v.Gemini.Node = cfg.String("gemini.node")
}
