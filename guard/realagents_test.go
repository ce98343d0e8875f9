package guard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/internal/realagents"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/managed"
)

// The real Claude Code and Codex, started outside any jail with cco's
// managed policy in place, as a vendor reads it: at its fixed path under
// /etc. The host's /etc is never written: each agent runs in a mount and
// network namespace of its own (unshare --mount --net), where /etc is a
// read-only overlay of the host's /etc and the test's policy directory is
// bound over /etc/claude-code or /etc/codex. The network namespace has only
// a loopback device, which is down: not one packet leaves the machine.
//
// "Unwrapped" is what sandbox.ProbeJail says it is: no read-only cco marker
// mounted at /run/cco/jail, or effective capabilities, or NoNewPrivs 0. In
// the namespace all three hold: /run/cco is covered by an empty tmpfs if the
// host has it, and the agent runs as root with root's capabilities and
// without NoNewPrivs.
//
// The hook commands are the installed scripts (guard.Script), which run
// this test binary as the helper; the escape hatch is pointed at a path
// that does not exist, so that no /etc/cco/allow-unwrapped on the host
// turns the block into a warning.

// unwrappedRun is one agent's namespace: the policy directory to bind over
// /etc/<etcDir>, a home and a workspace.
type unwrappedRun struct {
	dir, policy, home, ws string
	etcDir                string
}

func newUnwrappedRun(t *testing.T, etcDir string) *unwrappedRun {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("the real-agent guard tests mount a private /etc in a namespace of their own: run them as root")
	}
	for _, tool := range []string{"unshare", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (package util-linux, mount): %v", tool, err)
		}
	}
	dir := testenv.WorkDir(t)
	r := &unwrappedRun{dir: dir, policy: filepath.Join(dir, "policy"), home: filepath.Join(dir, "home"), ws: filepath.Join(dir, "ws"), etcDir: etcDir}
	for _, d := range []string{r.policy, r.home, r.ws, filepath.Join(dir, "etc-layer", etcDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// hooked rewrites a policy file's hook commands to the installed scripts'
// text, written here, whose helper is this test binary.
func (r *unwrappedRun) hooked(t *testing.T, policy []byte) []byte {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(r.dir, "sandbox-helper")
	body := "#!/bin/sh\nCCO_GUARD_TEST_HELPER=1 CCO_GUARD_TEST_HATCH=" + filepath.Join(r.dir, "no-allow-unwrapped") + " exec " + self + " \"$@\"\n"
	if err := os.WriteFile(helper, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	out := string(policy)
	for _, hook := range []string{guard.HookSessionStart, guard.HookPromptGate} {
		p := filepath.Join(r.dir, hook)
		script := strings.ReplaceAll(string(guard.Script(hook)), guard.HelperPath, helper)
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, guard.ScriptPath(hook)) {
			t.Fatalf("the managed policy does not name %s:\n%s", guard.ScriptPath(hook), policy)
		}
		out = strings.ReplaceAll(out, guard.ScriptPath(hook), p)
	}
	return []byte(out)
}

// write puts a policy file at rel in the directory bound over /etc/<etcDir>.
func (r *unwrappedRun) write(t *testing.T, rel string, b []byte) {
	t.Helper()
	p := filepath.Join(r.policy, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// cmd runs argv in the namespace, in the workspace, with env and nothing
// else of the test's environment.
func (r *unwrappedRun) cmd(ctx context.Context, env []string, argv ...string) *exec.Cmd {
	setup := `set -e
mount -t overlay cco-test-etc -o "lowerdir=$1:/etc" /etc
mount --bind "$2" "/etc/$3"
if [ -e /run/cco ]; then mount -t tmpfs -o ro,mode=0755 cco-test-no-marker /run/cco; fi
shift 3
exec "$@"`
	args := append([]string{"--mount", "--net", "sh", "-c", setup, "sh", filepath.Join(r.dir, "etc-layer"), r.policy, r.etcDir}, argv...)
	c := exec.CommandContext(ctx, "unshare", args...)
	c.Dir = r.ws
	c.Env = append([]string{"HOME=" + r.home, "PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", "NO_COLOR=1", "LANG=C.UTF-8"}, env...)
	c.Stdin = strings.NewReader("")
	c.WaitDelay = 5 * time.Second
	return c
}

// hostUntouched fails the test if the run changed /etc/<etcDir> on the host.
func hostUntouched(t *testing.T, etcDir string) func() {
	t.Helper()
	p := filepath.Join("/etc", etcDir)
	before, errBefore := os.Lstat(p)
	return func() {
		after, errAfter := os.Lstat(p)
		switch {
		case (errBefore == nil) != (errAfter == nil):
			t.Errorf("%s on the host changed across the run: before %v, after %v", p, errBefore, errAfter)
		case errBefore == nil && !after.ModTime().Equal(before.ModTime()):
			t.Errorf("%s on the host was modified by the run", p)
		}
	}
}

// The real Claude Code, unwrapped, headless (-p hello) with cco's drop-in
// 50-cco.json: it runs the SessionStart verifier and the UserPromptSubmit
// gate, which blocks the prompt, and prints the guard's reason. The model is
// never called (with no retries, a call would end in "API Error").
func TestRealClaudeBlockedUnwrapped(t *testing.T) {
	realagents.Require(t)
	claude := filepath.Join(realagents.Dir(t, realagents.Claude), realagents.ClaudeBinary)
	if _, err := os.Stat(claude); err != nil {
		t.Fatalf("%s: %v (fix: remove %s, and the next run unpacks it again)", claude, err, realagents.CacheDir)
	}
	r := newUnwrappedRun(t, filepath.Base(filepath.Dir(managed.ClaudeDropinDir)))
	rel, err := filepath.Rel(filepath.Dir(managed.ClaudeDropinDir), managed.ClaudeDropinPath)
	if err != nil {
		t.Fatal(err)
	}
	r.write(t, rel, r.hooked(t, managed.ClaudeSettings()))
	defer hostUntouched(t, r.etcDir)()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := r.cmd(ctx, []string{"ANTHROPIC_API_KEY=sk-ant-dummy-key-for-an-offline-test", "CLAUDE_CODE_MAX_RETRIES=0"}, claude, "-p", "hello")
	out, err := c.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("claude did not finish in 2 minutes:\n%s", out)
	}
	text := string(out)
	for _, want := range []string{
		"UserPromptSubmit operation blocked by hook",
		"cco guard: blocked: this claude is not running inside a cco jail (",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("claude's output lacks %q (exit %v):\n%s", want, err, text)
		}
	}
	if strings.Contains(text, "API Error") {
		t.Errorf("claude called the model although the gate blocked the prompt:\n%s", text)
	}
}

// The real Codex, unwrapped, with cco's requirements.toml and
// managed_config.toml. Codex reads the requirements' hooks as system hooks
// (source "system", no trust asked) when features.hooks is on, for exec and
// for the app-server alike.
//
// Headless `codex exec` runs both hooks and reports only each hook's status:
// "hook: UserPromptSubmit Blocked", and ends the turn without a model call;
// its human output does not print the hook's stderr. The app-server, the
// headless protocol of Codex's own clients, carries the hook's output: the
// userPromptSubmit run is "blocked" with the guard's reason as its feedback
// entry, and the SessionStart verifier's warning as a warning entry.
func TestRealCodexBlockedUnwrapped(t *testing.T) {
	realagents.Require(t)
	codex := filepath.Join(realagents.Dir(t, realagents.Codex), realagents.CodexTree, "bin", "codex")
	if _, err := os.Stat(codex); err != nil {
		t.Fatalf("%s: %v (fix: remove %s, and the next run unpacks it again)", codex, err, realagents.CacheDir)
	}
	r := newUnwrappedRun(t, filepath.Base(filepath.Dir(managed.CodexRequirementsPath)))
	r.write(t, filepath.Base(managed.CodexRequirementsPath), r.hooked(t, managed.CodexRequirements()))
	r.write(t, filepath.Base(managed.CodexManagedConfigPath), managed.CodexManagedConfig())
	defer hostUntouched(t, r.etcDir)()
	key := []string{"OPENAI_API_KEY=sk-dummy-key-for-an-offline-test"}

	t.Run("exec", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var out testenv.SyncBuffer
		c := r.cmd(ctx, key, codex, "exec", "--skip-git-repo-check", "hello")
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		// A model call that cannot connect retries for minutes
		// ("Reconnecting... n/5", then "waiting for network"): its first
		// retry is the answer that the gate let the prompt through.
		var err error
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case <-tick.C:
				if strings.Contains(out.String(), "Reconnecting") {
					cancel()
					err = <-done
					break wait
				}
			}
		}
		text := out.String()
		if ctx.Err() != nil && !strings.Contains(text, "Reconnecting") {
			t.Fatalf("codex exec did not finish in 90 s:\n%s", text)
		}
		for _, want := range []string{"hook: SessionStart Completed", "hook: UserPromptSubmit Blocked"} {
			if !strings.Contains(text, want) {
				t.Errorf("codex exec's output lacks %q (exit %v):\n%s", want, err, text)
			}
		}
		if strings.Contains(text, "Reconnecting") {
			t.Errorf("codex called the model although the gate blocked the prompt:\n%s", text)
		}
	})

	t.Run("app-server", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		c := r.cmd(ctx, key, codex, "app-server")
		c.Stdin = nil
		in, err := c.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		c.Stderr = &stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { in.Close(); c.Process.Kill(); c.Wait() }()
		runs := appServerTurn(t, in, stdout, r.ws, "hello")
		gate, start := runs["userPromptSubmit"], runs["sessionStart"]
		if gate == nil {
			t.Fatalf("codex ran no userPromptSubmit hook (stderr:\n%s)", stderr.String())
		}
		if gate.Status != "blocked" || gate.Source != "system" || gate.SourcePath != managed.CodexRequirementsPath {
			t.Errorf("userPromptSubmit: status %q, source %q from %q; want blocked, system, %s", gate.Status, gate.Source, gate.SourcePath, managed.CodexRequirementsPath)
		}
		if !gate.has("feedback", "cco guard: blocked: this codex is not running inside a cco jail (") {
			t.Errorf("the gate's run lacks the guard's reason: %+v", gate.Entries)
		}
		if start == nil || !start.has("warning", "cco guard: WARNING: this codex is not running inside a cco jail") {
			t.Errorf("the SessionStart verifier's warning is missing: %+v", start)
		}
	})
}

// hookRun is the part of the app-server's HookRunSummary the test reads.
type hookRun struct {
	EventName  string `json:"eventName"`
	Status     string `json:"status"`
	Source     string `json:"source"`
	SourcePath string `json:"sourcePath"`
	Entries    []struct {
		Kind string `json:"kind"`
		Text string `json:"text"`
	} `json:"entries"`
}

func (h *hookRun) has(kind, prefix string) bool {
	for _, e := range h.Entries {
		if e.Kind == kind && strings.HasPrefix(e.Text, prefix) {
			return true
		}
	}
	return false
}

// appServerTurn speaks Codex's app-server protocol (JSON-RPC, one message a
// line): initialize, start a thread in cwd, start one turn with prompt, and
// read until the turn completes or its userPromptSubmit hooks have run. It
// returns the completed hook runs by event name.
func appServerTurn(t *testing.T, in io.Writer, out io.Reader, cwd, prompt string) map[string]*hookRun {
	t.Helper()
	send := func(v any) {
		b, _ := json.Marshal(v)
		if _, err := in.Write(append(b, '\n')); err != nil {
			t.Fatalf("writing to the app-server: %v", err)
		}
	}
	type message struct {
		ID     *int            `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
		Params json.RawMessage `json:"params"`
	}
	lines := make(chan message)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		for sc.Scan() {
			var m message
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
	}()
	send(map[string]any{"id": 1, "method": "initialize", "params": map[string]any{"clientInfo": map[string]string{"name": "cco-test", "version": "1"}}})
	runs := map[string]*hookRun{}
	deadline := time.After(75 * time.Second)
	for {
		var m message
		var ok bool
		select {
		case m, ok = <-lines:
			if !ok {
				t.Fatalf("the app-server closed its output before the turn completed")
			}
		case <-deadline:
			t.Fatalf("the app-server's turn did not complete in 75 s")
		}
		if len(m.Error) > 0 {
			t.Fatalf("the app-server answered with an error: %s", m.Error)
		}
		switch {
		case m.ID != nil && *m.ID == 1:
			send(map[string]any{"method": "initialized"})
			send(map[string]any{"id": 2, "method": "thread/start", "params": map[string]any{"cwd": cwd}})
		case m.ID != nil && *m.ID == 2:
			var res struct {
				Thread struct{ ID string } `json:"thread"`
			}
			if err := json.Unmarshal(m.Result, &res); err != nil || res.Thread.ID == "" {
				t.Fatalf("thread/start: %s (%v)", m.Result, err)
			}
			send(map[string]any{"id": 3, "method": "turn/start", "params": map[string]any{"threadId": res.Thread.ID,
				"input": []map[string]string{{"type": "text", "text": prompt}}}})
		case m.Method == "hook/completed":
			var p struct{ Run hookRun }
			if err := json.Unmarshal(m.Params, &p); err != nil {
				t.Fatalf("hook/completed: %v", err)
			}
			runs[p.Run.EventName] = &p.Run
			if p.Run.EventName == "userPromptSubmit" {
				return runs
			}
		case m.Method == "turn/completed":
			return runs
		}
	}
}
