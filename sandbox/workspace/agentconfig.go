package workspace

import (
	"path/filepath"
	"strings"

	"github.com/cco-dev/cco/agent"
)

// An agent loads its project config from the directory it starts in, and
// a session may write it in any subdirectory of the workspace: the jail
// protects the workspace's top only, since it cannot know where the next
// agent will start. So the walk notes the subdirectories that hold an
// agent's config name, and the audit warns about each such file created or
// changed by the session: started there, the agent (another agent, with
// another login) would run what it names.

// agentNames are the first path elements of every agent's project config
// (.claude, .opencode, opencode.json, .github, ...).
var agentNames = func() map[string]bool {
	out := map[string]bool{}
	for _, rel := range append(agent.WorkspaceDirs(), agent.WorkspaceReadOnly()...) {
		first, _, _ := strings.Cut(rel, "/")
		out[first] = true
	}
	return out
}()

// eachAgentConfig calls fn with every agent config file that dirs may
// hold: each profile's read-only names, and the entries of those that are
// directories.
func eachAgentConfig(dirs []string, fn func(string)) {
	for _, d := range dirs {
		// One listing, so that only the names the directory holds cost a
		// look each.
		held := map[string]bool{}
		for _, e := range (&repoFinder{}).list(d) {
			held[e.name] = agentNames[e.name]
		}
		for _, rel := range agent.WorkspaceReadOnly() {
			if first, _, _ := strings.Cut(rel, "/"); !held[first] {
				continue
			}
			p := filepath.Join(d, rel)
			if !strings.HasSuffix(rel, "/") {
				fn(p)
				continue
			}
			for _, e := range (&repoFinder{}).list(p) {
				fn(filepath.Join(p, e.name))
			}
		}
	}
}

// agentConfigWhy is the warning for an agent's project config a session
// made or changed in a subdirectory.
const agentConfigWhy = "an agent's project config, created or changed in this session; an agent started in that directory loads it and runs what it names"
