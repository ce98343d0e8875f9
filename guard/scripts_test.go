package guard

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runScript runs hook's script (with helper as its helper) under /bin/sh, as
// both agents do, and returns its exit code and output.
func runScript(t *testing.T, hook, helper string, env []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), hook)
	if err := os.WriteFile(p, script(hook, helper), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", p+" "+strings.Join(args, " "))
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func fakeHelper(t *testing.T, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sandbox-helper")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestScriptFailsClosed(t *testing.T) {
	cases := []struct {
		name, helperBody string
		mode             os.FileMode
		missing          bool
		wantCode         int
		wantErr          string
		wantOut          string
	}{
		{name: "helper missing", missing: true, wantCode: 2, wantErr: "is missing, so this is blocked"},
		{name: "helper not executable", helperBody: "exit 0", mode: 0o644, wantCode: 2, wantErr: "is missing, so this is blocked"},
		{name: "helper allows", helperBody: `echo "args:$*"; exit 0`, mode: 0o755, wantCode: 0, wantOut: "args:guard prompt-gate claude"},
		{name: "helper blocks", helperBody: "echo reason >&2; exit 2", mode: 0o755, wantCode: 2, wantErr: "reason"},
		{name: "helper fails", helperBody: "exit 1", mode: 0o755, wantCode: 2, wantErr: "failed (exit 1), so this is blocked"},
		{name: "helper crashes", helperBody: "kill -SEGV $$", mode: 0o755, wantCode: 2, wantErr: "so this is blocked"},
		{name: "helper is killed", helperBody: "kill -KILL $$", mode: 0o755, wantCode: 2, wantErr: "so this is blocked"},
		{name: "helper exits 3", helperBody: "exit 3", mode: 0o755, wantCode: 2, wantErr: "failed (exit 3)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			helper := filepath.Join(t.TempDir(), "absent")
			if !c.missing {
				helper = fakeHelper(t, c.helperBody, c.mode)
			}
			code, out, errOut := runScript(t, HookPromptGate, helper, nil, claudePrompt, "claude")
			if code != c.wantCode || !strings.Contains(errOut, c.wantErr) || !strings.Contains(out, c.wantOut) {
				t.Fatalf("exit %d stdout %q stderr %q, want %d, %q, %q", code, out, errOut, c.wantCode, c.wantOut, c.wantErr)
			}
			if code == 2 && strings.TrimSpace(errOut) == "" {
				t.Fatal("exit 2 with an empty stderr: Codex would let the prompt through")
			}
		})
	}
}

// The script hands the agent's JSON to the real helper untouched.
func TestScriptRunsRealHelper(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{helperEnv + "=1", "CCO_GUARD_TEST_HATCH=" + filepath.Join(t.TempDir(), "none")}
	for _, agent := range agentNames {
		start, prompt := inputs(agent)
		code, _, errOut := runScript(t, HookPromptGate, exe, env, prompt, agent)
		if code != 2 || !strings.Contains(errOut, "cco guard: blocked: this "+agent) {
			t.Errorf("%s gate outside: exit %d stderr %q", agent, code, errOut)
		}
		code, out, _ := runScript(t, HookSessionStart, exe, env, start, agent)
		if code != 0 || !strings.Contains(out, `"systemMessage"`) {
			t.Errorf("%s verifier outside: exit %d stdout %q", agent, code, out)
		}
	}
}

func TestScriptInstalledForm(t *testing.T) {
	for _, hook := range []string{HookSessionStart, HookPromptGate} {
		s := string(Script(hook))
		if !strings.HasPrefix(s, "#!/bin/sh\n") || !strings.Contains(s, "helper="+HelperPath+"\n") || !strings.Contains(s, `"$helper" guard `+hook+` "$@"`) {
			t.Errorf("%s script:\n%s", hook, s)
		}
	}
}
