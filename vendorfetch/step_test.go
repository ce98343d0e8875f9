package vendorfetch

import (
	"testing"

	"github.com/cco-dev/cco/agent"
)

// Every profile has a vendor step, and the step installs the files the
// profile runs: the binary (or script) and the interpreter link.
func TestVendorAgentsRunTheProfiles(t *testing.T) {
	for _, name := range agent.Names() {
		p, _ := agent.Lookup(name)
		a, ok := lookupAgent(name)
		if !ok {
			t.Errorf("%s: no vendor step (add it to vendorAgents)", name)
			continue
		}
		if got := a.dir + "/current/" + a.entry; got != p.Binary {
			t.Errorf("%s: the step installs %s, the profile runs %s", name, got, p.Binary)
		}
		if p.Interpreter != "" && a.dir+"/current/"+a.interp != p.Interpreter {
			t.Errorf("%s: the step links %s/current/%s, the profile runs %s", name, a.dir, a.interp, p.Interpreter)
		}
	}
	// The sources check the same files they install.
	for name, want := range map[string]string{AgentClaude: claudeEntry, AgentGemini: GeminiEntry} {
		if a, _ := lookupAgent(name); a.entry != want {
			t.Errorf("%s: the profile runs %s, the source checks %s", name, a.entry, want)
		}
	}
}
