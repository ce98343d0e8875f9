package wiring

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
)

func TestStepsInstallScripts(t *testing.T) {
	dir := t.TempDir()
	rep := provision.Execute(provisiontest.Run(t, dir), Steps())
	if rep.ExitCode() != 0 || rep.Changed != 2 {
		t.Fatalf("first run: %+v", rep.Steps)
	}
	ids := []string{rep.Steps[0].ID, rep.Steps[1].ID}
	if ids[0] != "guard.session-start" || ids[1] != "guard.prompt-gate" {
		t.Fatalf("step ids %v", ids)
	}
	for _, hook := range []string{guard.HookSessionStart, guard.HookPromptGate} {
		p := filepath.Join(dir, guard.ScriptPath(hook))
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s mode %04o, want 0755", p, fi.Mode().Perm())
		}
		if uid, _ := guard.Owner(fi); uid != provision.SystemUID() {
			t.Errorf("%s owner %d", p, uid)
		}
		b, _ := os.ReadFile(p)
		if !bytes.Equal(b, guard.Script(hook)) {
			t.Errorf("%s content differs", p)
		}
	}
	rep = provision.Execute(provisiontest.Run(t, dir), Steps())
	if rep.Changed != 0 || rep.ExitCode() != 0 {
		t.Fatalf("second run changed something: %+v", rep.Steps)
	}
}
