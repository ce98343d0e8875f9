package vendorfetch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
)

// An upgrade that resolves an older version is refused unless
// AllowDowngrade, and the refusal names both versions and the flag.
func TestUpgradeIsForwardOnly(t *testing.T) {
	s := newStore(t)
	plat := testPlatform(t)
	s.addClaude("2.1.300", nil, false, plat)
	s.addClaude("2.1.299", nil, false, plat)
	s.put("/claude/stable", []byte("2.1.300\n"))
	root := t.TempDir()
	wantStatus(t, install(t, root, s.config(AgentClaude)), StepClaude, provision.StatusChanged)
	s.put("/claude/stable", []byte("2.1.299\n"))
	cfg := s.config(AgentClaude)
	cfg.Upgrade = map[string]bool{AgentClaude: true}
	sr := provisiontest.Step(t, install(t, root, cfg), StepClaude)
	if sr.Status != provision.StatusFailed || !strings.Contains(sr.Detail, "2.1.300") || !strings.Contains(sr.Detail, "2.1.299") || !strings.Contains(sr.Detail, "--allow-downgrade") {
		t.Fatalf("downgrade not refused clearly: %+v", sr)
	}
	cfg.AllowDowngrade = true
	wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
}

// rollback runs the rollback of the agent (claude when none is named).
func rollback(t *testing.T, root string, cfg Config, agent ...string) provision.StepReport {
	t.Helper()
	a := AgentClaude
	if len(agent) > 0 {
		a = agent[0]
	}
	return provisiontest.Step(t, provisiontest.Execute(t, root, RollbackSteps(cfg, []string{a})), "rollback."+a)
}

// A rollback switches current to the previous version and swaps the two; a
// rollback with no previous version is a clear error that changes nothing.
func TestRollback(t *testing.T) {
	s := newStore(t)
	plat := testPlatform(t)
	s.addClaude("2.1.299", nil, false, plat)
	s.addClaude("2.1.300", nil, false, plat)
	s.put("/claude/stable", []byte("2.1.299\n"))
	root := t.TempDir()
	cfg := s.config(AgentClaude)
	wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	if sr := rollback(t, root, cfg); sr.Status != provision.StatusFailed || !strings.Contains(sr.Detail, "no previous version") {
		t.Fatalf("rollback without a previous version: %+v", sr)
	}
	s.put("/claude/stable", []byte("2.1.300\n"))
	cfg.Upgrade = map[string]bool{AgentClaude: true}
	wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	link := filepath.Join(root, ClaudeDir, "current")
	if l, _ := os.Readlink(link); l != "2.1.300" {
		t.Fatalf("current -> %q after the upgrade", l)
	}
	if sr := rollback(t, root, cfg); sr.Status != provision.StatusChanged {
		t.Fatalf("rollback: %+v", sr)
	}
	if l, _ := os.Readlink(link); l != "2.1.299" {
		t.Fatalf("current -> %q after the rollback, want 2.1.299", l)
	}
	if st := loadStateFrom(t, root); st.Version != "2.1.299" || st.Previous != "2.1.300" {
		t.Fatalf("state after rollback: %+v", st)
	}
	// A second rollback never goes forward to the newer kept version.
	if sr := rollback(t, root, cfg); sr.Status != provision.StatusFailed || !strings.Contains(sr.Detail, "nothing older") {
		t.Fatalf("second rollback: %+v", sr)
	}
	if l, _ := os.Readlink(link); l != "2.1.299" {
		t.Fatalf("current -> %q after a second rollback, want 2.1.299 still", l)
	}
}

func loadStateFrom(t *testing.T, root string) agentState {
	var st agentState
	if err := json.Unmarshal(readReceipt(t, root).Extra[StepClaude], &st); err != nil {
		t.Fatal(err)
	}
	return st
}
