package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
)

// TestInterpreterRunsTheScript: a profile with an interpreter is started as
// the interpreter link the vendor step made, then the script, so that the
// first node on the jail's PATH never runs it. The planned command runs
// here, outside bwrap, with an old node first on PATH and the link at a
// newer one: the newer one answers.
func TestInterpreterRunsTheScript(t *testing.T) {
	var p *agent.Profile
	for _, q := range agent.All() {
		if q.Interpreter != "" {
			p = q
			break
		}
	}
	if p == nil {
		t.Fatal("no profile has an interpreter: gemini's runs its script under the Node it names")
	}
	f := newFixture(t)
	testenv.Must(t, os.MkdirAll(filepath.Join(f.home, p.Login[0]), 0o700))
	root := t.TempDir()
	old := SystemRoot
	SystemRoot = root
	defer func() { SystemRoot = old }()
	bin := filepath.Join(root, "usr/local/bin")
	newer := filepath.Join(root, "opt/node-v22/bin/node")
	for file, body := range map[string]string{
		bin + "/node":   "#!/bin/sh\necho old \"$@\"\n",
		newer:           "#!/bin/sh\necho newer \"$@\"\n",
		root + p.Binary: "#!/usr/bin/env node\n",
	} {
		testenv.Must(t, os.MkdirAll(filepath.Dir(file), 0o755))
		testenv.Must(t, os.WriteFile(file, []byte(body), 0o755))
	}
	testenv.Must(t, os.MkdirAll(filepath.Dir(root+p.Interpreter), 0o755))
	testenv.Must(t, os.Symlink(newer, root+p.Interpreter))
	path := "PATH=" + bin + ":/usr/bin:/bin"
	for _, direct := range []bool{true, false} {
		s, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, User: "ada", UID: 1000, Cwd: f.ws,
			Environ: []string{path}, Args: []string{"hi"}, Direct: direct})
		testenv.Must(t, err)
		cmd := s.Command
		if !direct {
			if len(cmd) < 3 || !slices.Equal(cmd[:3], []string{root + HelperPath, "exec", "--"}) {
				t.Fatalf("helper command %q", cmd)
			}
			cmd = cmd[3:]
		}
		if len(cmd) < 2 || cmd[0] != root+p.Interpreter || cmd[1] != root+p.Binary {
			t.Fatalf("direct=%v: command %q, want the interpreter %s, then the script %s", direct, cmd, root+p.Interpreter, root+p.Binary)
		}
		c := exec.Command(cmd[0], cmd[1:]...)
		c.Env = []string{path}
		out, err := c.Output()
		if err != nil || !strings.HasPrefix(string(out), "newer "+root+p.Binary+" ") {
			t.Errorf("direct=%v: %q ran %q (%v), want the newer node with the script", direct, cmd, out, err)
		}
	}
	if err := p.Missing(root); err != nil {
		t.Errorf("Missing: %v", err)
	}
	testenv.Must(t, os.Remove(newer))
	if err := p.Missing(root); err == nil || !strings.Contains(err.Error(), root+p.Interpreter) {
		t.Errorf("Missing with the link pointing nowhere: %v", err)
	}
}
