package managed

import (
	"testing"

	"github.com/cco-dev/cco/guard"
)

func TestGuardCommandMatching(t *testing.T) {
	for _, c := range []struct {
		cmd, hook, agent string
		want             bool
	}{
		{"/usr/libexec/cco/guard/prompt-gate codex", guard.HookPromptGate, "codex", true},
		{"/usr/libexec/cco/guard/prompt-gate", guard.HookPromptGate, "codex", true},
		{`"/usr/libexec/cco/guard/prompt-gate" 'claude'`, guard.HookPromptGate, "claude", true},
		{"/usr/libexec/cco/guard/prompt-gate claude", guard.HookPromptGate, "codex", false},
		{"/usr/libexec/cco/guard/prompt-gate codex || true", guard.HookPromptGate, "codex", false},
		{"/usr/libexec/cco/guard/session-start codex", guard.HookPromptGate, "codex", false},
		{"/tmp/prompt-gate codex", guard.HookPromptGate, "codex", false},
	} {
		if got := IsGuardCommand(c.cmd, c.hook, c.agent); got != c.want {
			t.Errorf("IsGuardCommand(%q, %s, %s) = %v", c.cmd, c.hook, c.agent, got)
		}
	}
	for m, want := range map[string]bool{"": true, "*": true, "startup": true, "startup|resume": true, "resume": false, "clear|compact": false, "start": false} {
		if got := matchesStartup(&m); got != want {
			t.Errorf("matcher %q matches startup: %v", m, got)
		}
	}
}
