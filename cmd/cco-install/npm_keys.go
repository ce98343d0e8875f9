package main

import (
	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/vendorfetch"
)

// The install.toml keys of the agents only an npm registry serves
// (<agent>.registry, .channel, .version, and .node for a Node program),
// their defaults from vendorfetch, and where they go.
func init() {
	for _, a := range vendorfetch.NpmOnly() {
		d := vendorDefaults.Npm[a]
		title := vendorfetch.Title(a)
		p, _ := agent.Lookup(a)
		registry, version := "npm registry of "+p.Installers.NPMPackage+" and its dependencies", "pinned "+title+" version"
		if vendorfetch.Native(a) {
			registry = "npm registry of " + p.Installers.NPMPackage + " and its platform builds"
			version += " (the build's, as `" + a + " --version` prints it, or a release of " + p.Installers.NPMPackage + ")"
		}
		keys = append(keys,
			key{a + ".registry", d.Registry, "", registry},
			key{a + ".channel", "", "", title + " dist-tag of " + p.Installers.NPMPackage + " (latest when no version is pinned)"},
			key{a + ".version", "", "", version},
		)
		if vendorfetch.RunsOnNode(a) {
			keys = append(keys, key{a + ".node", d.Node, "", "the Node binary that runs " + title + ": a name on the system PATH or an absolute path, linked beside the installed version"})
		}
	}
	vendorKeyMaps = append(vendorKeyMaps, npmVendorConfig)
}

// npmVendorConfig maps those keys onto vendorfetch's settings.
func npmVendorConfig(cfg *Config, v *vendorfetch.Config) {
	if v.Npm == nil {
		v.Npm = map[string]vendorfetch.NpmConfig{}
	}
	for _, a := range vendorfetch.NpmOnly() {
		n := vendorfetch.NpmConfig{Registry: cfg.String(a + ".registry"), Channel: cfg.String(a + ".channel"), Version: cfg.String(a + ".version")}
		if vendorfetch.RunsOnNode(a) {
			n.Node = cfg.String(a + ".node")
		}
		v.Npm[a] = n
	}
}
