package main

import (
	"strings"

	"github.com/cco-dev/cco/sandbox/engine"
)

// engineNote says which jail engine a launch on this kernel uses and which
// layers it puts under the mounts (sandbox/engine; docs/adr/0145-cco-jail-engine.md).
func engineNote() string {
	layers := []string{"seccomp"}
	var what string
	if engine.Auto() == engine.CCO {
		what = "cco's own (this kernel has the mount API)"
		if l := engine.Layer(engine.LandlockABI()); l != "" {
			layers = append(layers, l)
		} else {
			layers = append(layers, "no Landlock (this kernel has none)")
		}
	} else {
		what = "bubblewrap (this kernel has no mount_setattr, Linux 5.12)"
	}
	return "the jail engine: " + what + "; layers: " + strings.Join(layers, ", ") + " (" + engine.EnvVar + " overrides it for a launch)"
}
