package wiring

import (
	"fmt"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/provision"
)

// Steps installs the two guard scripts, root-owned 0755 (readable and
// runnable by every user, writable by root alone).
func Steps() []provision.Step {
	return []provision.Step{
		scriptStep("guard.session-start", "install the SessionStart verifier script", guard.HookSessionStart),
		scriptStep("guard.prompt-gate", "install the UserPromptSubmit gate script", guard.HookPromptGate),
	}
}

func scriptStep(id, name, hook string) *provision.File {
	return &provision.File{
		StepID:   id,
		StepName: name,
		Path:     guard.ScriptPath(hook),
		Mode:     0o755,
		UID:      provision.SystemUID(),
		GID:      provision.SystemGID(),
		Content:  guard.Script(hook),
		Fix:      fmt.Sprintf("move it away; cco's guard script must be at %s for the managed policy to find it", guard.ScriptPath(hook)),
	}
}
