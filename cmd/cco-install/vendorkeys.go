package main

import (
	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/vendorfetch"
)

// vendorDefaults are vendorfetch's defaults: the one home of the vendor
// step's defaults, which the keys show.
var vendorDefaults = vendorfetch.DefaultConfig()

// vendorKeyMaps map each agent's keys (<agent>_keys.go) onto vendorfetch's
// settings.
var vendorKeyMaps []func(cfg *Config, v *vendorfetch.Config)

func init() {
	keys = append(keys,
		key{"npm_keys", "", "", "file of a private npm registry's signing keys (its /-/npm/v1/keys answer), trusted besides the public registry's"},
	)
}

// vendorAgentConfig maps every agent's keys, and npm_keys, onto
// vendorfetch's settings.
func vendorAgentConfig(cfg *Config, v *vendorfetch.Config) {
	for _, m := range vendorKeyMaps {
		m(cfg, v)
	}
	v.NpmKeys = cfg.String("npm_keys")
	// A pin beside an explicitly set channel is an error; beside the
	// defaulted one it is not.
	for _, a := range agent.Names() {
		for _, k := range []string{a + ".channel", a + ".version"} {
			if knownKey(k) {
				v.Explicit[k] = cfg.IsSet(k)
			}
		}
	}
}
