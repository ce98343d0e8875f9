package guard

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
)

// The test binary doubles as the helper (`guard.test guard <hook> <agent>`)
// when a test runs it, inside bwrap or behind a script, with this variable
// set. Only the test binary honours it; production has no such switch.
const helperEnv = "CCO_GUARD_TEST_HELPER"

func TestMain(m *testing.M) {
	if addr := os.Getenv(fakeFactoryEnv); addr != "" && os.Getenv(helperEnv) != "1" {
		os.Exit(serveFakeFactory(addr))
	}
	if os.Getenv(helperEnv) == "1" {
		if p := os.Getenv("CCO_GUARD_TEST_HATCH"); p != "" {
			hatchPath = p
		}
		if len(os.Args) < 3 || os.Args[1] != "guard" {
			os.Stderr.WriteString("test helper: want `guard <hook> [agent]`\n")
			os.Exit(70)
		}
		os.Exit(Run(os.Args[2], os.Args[3:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// The hook input each agent really sends (shared/VENDORS.md).
const (
	claudeSessionStart = `{"session_id":"6f1c2a9e-2b7d-4c1e-9a51-0d3f7f1b9c11","transcript_path":"/home/u/.claude/projects/-work-proj/6f1c2a9e.jsonl","cwd":"/work/proj","hook_event_name":"SessionStart","source":"startup"}`
	claudePrompt       = `{"session_id":"6f1c2a9e-2b7d-4c1e-9a51-0d3f7f1b9c11","transcript_path":"/home/u/.claude/projects/-work-proj/6f1c2a9e.jsonl","cwd":"/work/proj","prompt_id":"p-01","permission_mode":"default","hook_event_name":"UserPromptSubmit","prompt":"fix the failing test"}`
	codexSessionStart  = `{"session_id":"0199a3f2-7c55-7d10-a1b2-3c4d5e6f7a8b","transcript_path":null,"cwd":"/work/proj","hook_event_name":"SessionStart","model":"gpt-5-codex","permission_mode":"bypassPermissions","source":"startup"}`
	codexPrompt        = `{"session_id":"0199a3f2-7c55-7d10-a1b2-3c4d5e6f7a8b","turn_id":"1","transcript_path":"/home/u/.codex/sessions/2026/12/01/rollout.jsonl","cwd":"/work/proj","hook_event_name":"UserPromptSubmit","model":"gpt-5-codex","permission_mode":"bypassPermissions","prompt":"fix the failing test"}`
	geminiSessionStart = `{"session_id":"b5d0c1e2-4f3a-4b6c-8d7e-9f0a1b2c3d4e","transcript_path":"/home/u/.gemini/tmp/proj/chats/session.json","cwd":"/work/proj","hook_event_name":"SessionStart","timestamp":"2026-12-02T07:00:00.000Z","source":"startup"}`
	geminiPrompt       = `{"session_id":"b5d0c1e2-4f3a-4b6c-8d7e-9f0a1b2c3d4e","transcript_path":"/home/u/.gemini/tmp/proj/chats/session.json","cwd":"/work/proj","hook_event_name":"BeforeAgent","timestamp":"2026-12-02T07:00:01.000Z","prompt":"fix the failing test"}`
)

func inputs(agent string) (start, prompt string) {
	switch agent {
	case "codex":
		return codexSessionStart, codexPrompt
	case "gemini":
		return geminiSessionStart, geminiPrompt
	}
	return claudeSessionStart, claudePrompt
}

// runHook runs Run in-process and returns its exit code and output.
func runHook(hook string, args []string, stdin string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Run(hook, args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// agentNames are the profiles the guard answers for.
var agentNames = agent.Names()
