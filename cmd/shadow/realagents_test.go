package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/internal/realagents"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/managed"
)

// The real Claude Code and Codex (the pinned npm packs, internal/realagents)
// through the shadow, with egress off and cco's managed policy where the
// vendor reads it, at /etc/claude-code or /etc/codex. The host's /etc is
// never written: the shadow runs in a mount namespace of its own, where /etc
// is a read-only overlay of the host's and the test's policy directory is
// bound over the vendor's; the jail's read-only view of / shows it there.
// That namespace has its own network namespace too, and the jail (egress
// off) one more, with only a loopback device: not one packet leaves.
//
// The policy's hook commands are the installed guard scripts, in the
// shadow's system root, whose helper is the shadow itself (as
// /usr/libexec/cco/sandbox-helper is). Inside the jail the gate lets the
// prompt in, and the agent then fails on the network.

// realAgentRoot is a system root (buildRoot) with the shadow, the guard scripts
// and the real agent in place of the fake one, and sandbox.toml.
func realAgentRoot(t *testing.T, agentName, pkg, sandboxToml string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("the real-agent shadow tests run the shadow as root and as uid 65534 in a namespace of their own: run them as root")
	}
	for _, tool := range []string{"bwrap", "unshare", "mount", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (packages bubblewrap, util-linux, mount): %v", tool, err)
		}
	}
	root, err := buildRoot()
	t.Cleanup(func() { os.RemoveAll(root) })
	if err != nil {
		t.Fatal(err)
	}
	// The profile's binary is <vendor dir>/current/<path in the package>.
	p, ok := agent.Lookup(agentName)
	i := strings.Index(p.Binary, "/current/")
	if !ok || i < 0 {
		t.Fatalf("no profile %q with a binary under current/", agentName)
	}
	current := root + p.Binary[:i+len("/current")]
	if err := os.RemoveAll(current); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(pkg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, current); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root + p.Binary); err != nil {
		t.Fatalf("the real agent is not where the shadow runs it: %v", err)
	}
	for _, hook := range []string{guard.HookSessionStart, guard.HookPromptGate} {
		script := strings.ReplaceAll(string(guard.Script(hook)), guard.HelperPath, root+guard.HelperPath)
		if err := os.WriteFile(root+guard.ScriptPath(hook), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/cco/sandbox.toml"), []byte(sandboxToml), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// vendorEtc is the policy directory the shadow's namespace binds over
// /etc/<name>, with the files the managed package writes there, their hook
// commands pointing at root's guard scripts.
type vendorEtc struct {
	name, layer, policy string
}

func newVendorEtc(t *testing.T, root, name string, files map[string][]byte) *vendorEtc {
	t.Helper()
	dir := testenv.WorkDir(t)
	e := &vendorEtc{name: name, layer: filepath.Join(dir, "etc-layer"), policy: filepath.Join(dir, "policy")}
	if err := os.MkdirAll(filepath.Join(e.layer, name), 0o755); err != nil {
		t.Fatal(err)
	}
	for rel, b := range files {
		s := string(b)
		for _, hook := range []string{guard.HookSessionStart, guard.HookPromptGate} {
			s = strings.ReplaceAll(s, guard.ScriptPath(hook), root+guard.ScriptPath(hook))
		}
		p := filepath.Join(e.policy, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// wrap makes c, a shadow command from world.cmd, run in the namespace, as
// c's user (setpriv drops root after the mounts).
func (e *vendorEtc) wrap(c *exec.Cmd, u runAs) {
	setup := `set -e
mount -t overlay cco-test-etc -o "lowerdir=$1:/etc" /etc
mount --bind "$2" "/etc/$3"
shift 3
exec "$@"`
	args := []string{"unshare", "--mount", "--net", "sh", "-c", setup, "sh", e.layer, e.policy, e.name}
	if u.uid != 0 {
		args = append(args, "setpriv", "--reuid="+strconv.Itoa(u.uid), "--regid="+strconv.Itoa(u.gid), "--clear-groups", "--")
	}
	args = append(args, c.Args...)
	args[len(args)-len(c.Args)] = c.Path
	path, _ := exec.LookPath("unshare")
	c.Path, c.Args = path, args
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// runUntil runs c as realagents.RunUntil does, for at most 75 s, holding
// the lock of the tests that launch the shadow.
func runUntil(t *testing.T, c *exec.Cmd, outPath string, done func(string) bool) string {
	t.Helper()
	defer testenv.Launching(t)()
	return realagents.RunUntil(t, c, outPath, 75*time.Second, done)
}

// The real Claude Code through the shadow, headless (-p hello), as uid 65534
// and as root. Its stream-json output shows the SessionStart hook's answer:
// the guard's verifier, run in the jail from the managed drop-in, reports
// that it is inside a cco jail (as root, with one false finding: see below). The gate lets the prompt in (no block), and
// the model call fails on the network: with no retries (pass_env lets
// CLAUDE_CODE_MAX_RETRIES=0 in) Claude Code says it cannot reach the API
// server.
func TestRealClaudeThroughTheShadow(t *testing.T) {
	realagents.Require(t)
	pkg := filepath.Join(realagents.Dir(t, realagents.Claude), filepath.Dir(realagents.ClaudeBinary))
	root := realAgentRoot(t, "claude", pkg, "egress = \"off\"\npass_env = [\"ANTHROPIC_API_KEY\", \"CLAUDE_CODE_MAX_RETRIES\"]\n")
	rel, err := filepath.Rel(filepath.Dir(managed.ClaudeDropinDir), managed.ClaudeDropinPath)
	if err != nil {
		t.Fatal(err)
	}
	etc := newVendorEtc(t, root, filepath.Base(filepath.Dir(managed.ClaudeDropinDir)), map[string][]byte{rel: managed.ClaudeSettings()})
	const unreachable = "API Error: Can't reach the API server"
	for _, u := range []runAs{asNobody, asRoot} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			c := w.cmd(root, "claude", w.ws, "-p", "hello", "--output-format", "stream-json", "--verbose")
			c.Env = append(c.Env, "ANTHROPIC_API_KEY=sk-ant-dummy-key-for-an-offline-test", "CLAUDE_CODE_MAX_RETRIES=0", "NO_COLOR=1")
			etc.wrap(c, u)
			text := runUntil(t, c, filepath.Join(w.base, "claude.out"), func(s string) bool { return strings.Contains(s, unreachable) })
			if !strings.Contains(text, unreachable) {
				t.Fatalf("claude did not get as far as the model call:\n%s", text)
			}
			start := ""
			for _, line := range strings.Split(text, "\n") {
				var ev struct{ Type, Subtype, Hook_event, Output string }
				if json.Unmarshal([]byte(line), &ev) == nil && ev.Subtype == "hook_response" && ev.Hook_event == "SessionStart" {
					start += ev.Output
				}
			}
			var verdict struct{ SystemMessage string }
			json.Unmarshal([]byte(start), &verdict)
			switch msg := verdict.SystemMessage; {
			// As uid 0 in the jail Claude Code opens its messaging inbox
			// (/tmp/cc-socks/<n>.sock) and hands its children, the hooks
			// among them, the inbox's token in CLAUDE_CODE_MESSAGING_TOKEN:
			// the agent's own variable (its profile's ChildEnv), which the
			// verifier must not report as a host token.
			case strings.HasPrefix(msg, "cco guard: inside a cco jail for claude"):
			default:
				t.Errorf("the guard's SessionStart verifier did not report the jail (its output: %q):\n%s", start, text)
			}
			for _, bad := range []string{"blocked by hook", "cco guard: blocked", "not running inside a cco jail"} {
				if strings.Contains(text, bad) {
					t.Errorf("claude's output has %q:\n%s", bad, text)
				}
			}
		})
	}
}

// The real Codex through the shadow, headless (exec hello), as uid 65534 and
// as root. Codex runs the requirements' hooks in the jail: its exec output
// reports both as completed (the gate did not block), and the model call
// then fails on the network, which Codex retries ("Reconnecting... n/5"):
// the first retry is the answer.
func TestRealCodexThroughTheShadow(t *testing.T) {
	realagents.Require(t)
	tree := filepath.Join(realagents.Dir(t, realagents.Codex), realagents.CodexTree)
	root := realAgentRoot(t, "codex", tree, "egress = \"off\"\npass_env = [\"OPENAI_API_KEY\"]\n")
	etc := newVendorEtc(t, root, filepath.Base(filepath.Dir(managed.CodexRequirementsPath)), map[string][]byte{
		filepath.Base(managed.CodexRequirementsPath):  managed.CodexRequirements(),
		filepath.Base(managed.CodexManagedConfigPath): managed.CodexManagedConfig(),
	})
	const reconnecting = "Reconnecting..."
	for _, u := range []runAs{asNobody, asRoot} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			c := w.cmd(root, "codex", w.ws, "exec", "--skip-git-repo-check", "hello")
			c.Env = append(c.Env, "OPENAI_API_KEY=sk-dummy-key-for-an-offline-test", "NO_COLOR=1")
			etc.wrap(c, u)
			text := runUntil(t, c, filepath.Join(w.base, "codex.out"), func(s string) bool { return strings.Contains(s, reconnecting) })
			for _, want := range []string{"hook: SessionStart Completed", "hook: UserPromptSubmit Completed", "failed to connect to Responses WebSocket", reconnecting} {
				if !strings.Contains(text, want) {
					t.Errorf("codex's output lacks %q:\n%s", want, text)
				}
			}
			if strings.Contains(text, "Blocked") {
				t.Errorf("a hook blocked in the jail:\n%s", text)
			}
		})
	}
}

// TestRealClaudeInTheHome: the real Claude Code's --version and --help
// through the shadow from the home directory, where an SSH login lands, as
// uid 65534 and as root: the launch starts with no workspace (one line says
// so) and prints what the unwrapped binary prints, not a refusal.
func TestRealClaudeInTheHome(t *testing.T) {
	realagents.Require(t)
	pkg := filepath.Join(realagents.Dir(t, realagents.Claude), filepath.Dir(realagents.ClaudeBinary))
	root := realAgentRoot(t, "claude", pkg, "egress = \"off\"\n")
	for _, u := range []runAs{asNobody, asRoot} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			for _, args := range [][]string{{"--version"}, {"--help"}} {
				r := runCmd(t, w.cmd(root, "claude", w.home, args...))
				want := realagents.Claude.Version + " (Claude Code)"
				if args[0] == "--help" {
					want = "Usage: claude"
				}
				if r.code != 0 || !strings.Contains(r.stdout, want) {
					t.Errorf("claude %s in the home: exit %d, want %q in\n%s\n%s", args[0], r.code, want, r.stdout, r.stderr)
				}
				if !strings.Contains(r.stderr, "no workspace") {
					t.Errorf("claude %s in the home: no line says it starts with no workspace:\n%s", args[0], r.stderr)
				}
			}
		})
	}
}

// The real Claude Code as root, with claude_skip_permissions = true: the
// shadow gives it --dangerously-skip-permissions and IS_SANDBOX=1 (the jail
// is the sandbox), so it runs instead of exiting with "cannot be used with
// root/sudo privileges", and gets as far as the model call.
func TestRealClaudeRootSkipsPermissions(t *testing.T) {
	realagents.Require(t)
	pkg := filepath.Join(realagents.Dir(t, realagents.Claude), filepath.Dir(realagents.ClaudeBinary))
	root := realAgentRoot(t, "claude", pkg, "egress = \"off\"\nclaude_skip_permissions = true\npass_env = [\"ANTHROPIC_API_KEY\", \"CLAUDE_CODE_MAX_RETRIES\"]\n")
	rel, err := filepath.Rel(filepath.Dir(managed.ClaudeDropinDir), managed.ClaudeDropinPath)
	if err != nil {
		t.Fatal(err)
	}
	etc := newVendorEtc(t, root, filepath.Base(filepath.Dir(managed.ClaudeDropinDir)), map[string][]byte{rel: managed.ClaudeSettings()})
	const unreachable = "API Error: Can't reach the API server"
	w := newWorld(t, asRoot)
	c := w.cmd(root, "claude", w.ws, "-p", "hello", "--output-format", "stream-json", "--verbose")
	c.Env = append(c.Env, "ANTHROPIC_API_KEY=sk-ant-dummy-key-for-an-offline-test", "CLAUDE_CODE_MAX_RETRIES=0", "NO_COLOR=1")
	etc.wrap(c, asRoot)
	text := runUntil(t, c, filepath.Join(w.base, "claude.out"), func(s string) bool {
		return strings.Contains(s, unreachable) || strings.Contains(s, "root/sudo")
	})
	if strings.Contains(text, "root/sudo") || !strings.Contains(text, unreachable) {
		t.Fatalf("root's claude with --dangerously-skip-permissions did not reach the model call:\n%s", text)
	}
	if !strings.Contains(text, `"permissionMode":"bypassPermissions"`) {
		t.Errorf("claude did not run with its permissions skipped:\n%s", text)
	}
}
