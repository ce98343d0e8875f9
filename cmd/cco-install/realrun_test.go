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
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/vendorfetch"
)

// TestRealAgentsInstalledThenRun is the end to end: cco-install
// installs everything into a system root (the real shadow under every
// agent's name, the helper, the egress proxy, the guard scripts, the
// vendors' policy files, and the real Claude Code, Codex and Gemini CLI from
// npm packs served on loopback), and each agent then runs as installed.
//
// The shadow is built with that root as its SystemRoot. The host's /etc
// and /usr are never written: each run is in a mount and network namespace
// of its own where the target's files appear at the paths a real install
// has them. /etc and /usr/libexec are read-only overlays of the host's, and
// the root's /etc/cco, the vendors' policy directories and
// /usr/libexec/cco are bound over theirs, so the policy's hook commands
// (/usr/libexec/cco/guard/...) run the installed scripts and helper. The
// network namespace has only a loopback device (down), and the jail has
// egress off.
//
// Through the shadow (uid 65534, headless, a dummy key) the gate lets the
// prompt in and the model call fails on the network. Unwrapped (the
// installed vendor binary, as root, in the same namespace with no jail) the
// guard blocks the prompt.
func TestRealAgentsInstalledThenRun(t *testing.T) {
	realagents.Require(t)
	testenv.RequireRoot(t)
	testenv.RequireBwrap(t)
	for _, tool := range []string{"unshare", "mount", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (packages util-linux, mount): %v", tool, err)
		}
	}
	reg, env := realRegistry(t)
	// Outside /tmp and /var/tmp, which the jail refuses.
	dir := testenv.WorkDir(t)
	root := filepath.Join(dir, "root")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, filepath.Dir(sandbox.ConfigPath)), 0o755))
	hostNodeIn(t, root)
	must(os.Symlink("/usr/bin/bwrap", root+sandbox.BwrapPath))
	// cco-install keeps an existing sandbox.toml.
	const toml = "egress = \"off\"\npass_env = [\"ANTHROPIC_API_KEY\", \"CLAUDE_CODE_MAX_RETRIES\", \"OPENAI_API_KEY\", \"GEMINI_API_KEY\", \"FACTORY_API_KEY\"]\n"
	must(os.WriteFile(root+sandbox.ConfigPath, []byte(toml), 0o644))

	// The real shadow with root linked in (static, as the release builds
	// it), and the egress proxy: cco-install copies both into place.
	bin := t.TempDir()
	shadow, proxy := filepath.Join(bin, "shadow"), filepath.Join(bin, "egress-proxy")
	for _, b := range []struct{ out, pkg, ldflags string }{
		{shadow, "github.com/cco-dev/cco/cmd/shadow", "-X github.com/cco-dev/cco/sandbox.SystemRoot=" + root},
		{proxy, "github.com/cco-dev/cco/cmd/egress-proxy", ""},
	} {
		build := exec.Command(testenv.GoTool(), "build", "-ldflags", b.ldflags, "-o", b.out, b.pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", b.pkg, err, out)
		}
	}
	r := runReport(t, installer(t, root, shadow, append(env, "CCO_EGRESS_PROXY_PATH="+proxy)))
	if r.Failed != 0 {
		t.Fatalf("install: %+v", r)
	}
	reg.Close()
	if b, err := os.ReadFile(root + sandbox.ConfigPath); err != nil || string(b) != toml {
		t.Fatalf("%s after the install: %q, %v", sandbox.ConfigPath, b, err)
	}
	ns := newTargetNS(t, dir, root)
	for _, hook := range []string{guard.HookSessionStart, guard.HookPromptGate} {
		if _, err := os.Stat(root + guard.ScriptPath(hook)); err != nil {
			t.Fatalf("cco-install did not install the guard script: %v", err)
		}
	}

	// Every agent's --version through the shadow, as uid 65534 and as root.
	for _, v := range []struct{ name, want string }{
		{"claude", realagents.Claude.Version + " (Claude Code)"},
		{"codex", "codex-cli " + strings.TrimSuffix(realagents.Codex.Version, "-linux-x64")},
		{vendorfetch.AgentGemini, realagents.Gemini.Version},
		{vendorfetch.AgentOpencode, realagents.Opencode.Version},
		{vendorfetch.AgentDroid, realagents.Droid.Version},
		{vendorfetch.AgentPi, realagents.Pi.Version},
		{vendorfetch.AgentCopilot, "GitHub Copilot CLI " + realagents.Copilot.Version},
	} {
		for _, uid := range []int{65534, 0} {
			t.Run(v.name+"/version/"+strconv.Itoa(uid), func(t *testing.T) {
				u := ns.user(t, v.name+"-version", uid)
				out := ns.run(t, u, false, nil, v.want, []string{root + BinDir + "/" + v.name, "--version"})
				has(t, out, []string{v.want}, []string{"cannot build the jail"})
			})
		}
	}

	const claudeUnreachable = "API Error: Can't reach the API server"
	for _, c := range []struct {
		name   string
		key    []string
		policy string // a policy file cco-install wrote, naming the guard
		// Through the shadow: its arguments, the output that ends the
		// wait, what the output must and must not have.
		args            []string
		done            string
		want, forbidden []string
		check           func(t *testing.T, out string)
		// Unwrapped: the vendor's arguments and their answer (none: the
		// agent has no guard); bareUID runs it as another user than root.
		bareArgs, bareWant, bareForbidden []string
		bareDone                          string // "": until it exits
		bareUID                           int
		// rpc, when set, drives the agent through its JSON-RPC stdin
		// instead (Droid's stream-jsonrpc).
		rpc bool
	}{
		{
			name: "claude", key: []string{"ANTHROPIC_API_KEY=sk-ant-dummy-key-for-an-offline-test", "CLAUDE_CODE_MAX_RETRIES=0"},
			policy: managed.ClaudeDropinPath,
			args:   []string{"-p", "hello", "--output-format", "stream-json", "--verbose"},
			done:   claudeUnreachable, want: []string{claudeUnreachable},
			forbidden:     []string{"blocked by hook", "cco guard: blocked", "not running inside a cco jail"},
			check:         claudeSessionStart,
			bareArgs:      []string{"-p", "hello"},
			bareWant:      []string{"UserPromptSubmit operation blocked by hook", "cco guard: blocked: this claude is not running inside a cco jail ("},
			bareForbidden: []string{"API Error"},
		},
		{
			name: "codex", key: []string{"OPENAI_API_KEY=sk-dummy-key-for-an-offline-test"},
			policy: managed.CodexRequirementsPath,
			args:   []string{"exec", "--skip-git-repo-check", "hello"},
			done:   "Reconnecting...",
			want:   []string{"hook: SessionStart Completed", "hook: UserPromptSubmit Completed", "failed to connect to Responses WebSocket", "Reconnecting..."},
			// codex exec prints each hook's status only, not its reason.
			forbidden: []string{"Blocked"},
			bareArgs:  []string{"exec", "--skip-git-repo-check", "hello"}, bareDone: "Reconnecting",
			bareWant:      []string{"hook: SessionStart Completed", "hook: UserPromptSubmit Blocked"},
			bareForbidden: []string{"Reconnecting"},
		},
		{
			// In the jail the gate does not run (ADR 46): the shadow
			// points GEMINI_CLI_SYSTEM_SETTINGS_PATH away.
			name: vendorfetch.AgentGemini, key: []string{"GEMINI_API_KEY=dummy-key-for-an-offline-test"},
			policy: managed.GeminiSettingsPath,
			args:   []string{"-p", "hello"},
			done:   "fetch failed", want: []string{"fetch failed"},
			forbidden: []string{"Agent execution blocked", "Security Warning", "untrusted", "not trusted", "docker", "podman", "Please set an Auth method"},
			bareArgs:  []string{"-p", "hello", "--skip-trust"},
			bareWant: []string{"Agent execution blocked: cco guard: blocked: this gemini is not running inside a cco jail",
				"cco guard: WARNING: this gemini is not running inside a cco jail"},
			bareForbidden: []string{"Security Warning"},
		},
		{
			// The guard's plugin: its verifier's report on stderr, the
			// gate lets the prompt in, and the model call fails on the
			// network (OpenCode retries it). Unwrapped the gate throws
			// and OpenCode aborts the request.
			name: vendorfetch.AgentOpencode, key: []string{"ANTHROPIC_API_KEY=sk-ant-dummy-key-for-an-offline-test"},
			policy: managed.OpencodeConfigPath,
			args:   []string{"run", "--print-logs", "--model", "anthropic/claude-sonnet-4-5", "hello"},
			done:   "Cannot connect to API", want: []string{"cco guard: inside a cco jail for opencode", "Cannot connect to API"},
			forbidden: []string{"cco guard: blocked", "failed to load plugin"},
			bareArgs:  []string{"run", "--model", "anthropic/claude-sonnet-4-5", "hello"}, bareDone: "cco guard: blocked",
			bareWant:      []string{"cco guard: blocked: this opencode is not running inside a cco jail", "cco guard: WARNING: this opencode is not running inside a cco jail"},
			bareForbidden: []string{"Cannot connect to API"},
			// As nobody, whose ~/.config/opencode is root's: OpenCode's
			// dependency install there fails at once instead of waiting
			// on the network, as the jail's read-only binding makes it.
			bareUID: 65534,
		},
		{
			// On the stream-jsonrpc path Droid runs UserPromptSubmit: in
			// the jail the gate answers 0 and the model call is retried;
			// unwrapped it answers 2 and Droid reports the block.
			name: vendorfetch.AgentDroid, key: []string{"FACTORY_API_KEY=fk-dummy-key-for-an-offline-test"},
			policy: managed.DroidSettingsPath, rpc: true,
			args:          []string{"exec", "--input-format", "stream-jsonrpc", "--output-format", "stream-jsonrpc"},
			done:          `"type":"llm_retry"`,
			want:          []string{`prompt-gate droid","timeout":10,"exitCode":0`, "cco guard: inside a cco jail for droid", `"type":"llm_retry"`},
			forbidden:     []string{"cco guard: blocked"},
			bareArgs:      []string{"exec", "--input-format", "stream-jsonrpc", "--output-format", "stream-jsonrpc"},
			bareDone:      `"type":"error","message":"cco guard: blocked`,
			bareWant:      []string{`prompt-gate droid","timeout":10,"exitCode":2`, `"type":"error","message":"cco guard: blocked: this droid is not running inside a cco jail`},
			bareForbidden: []string{`"type":"llm_retry"`},
		},
		{
			// Jail only: the prompt goes to the model, which the jail
			// cannot reach.
			name: vendorfetch.AgentPi, key: []string{"ANTHROPIC_API_KEY=sk-ant-dummy-key-for-an-offline-test"},
			args: []string{"-p", "hello"}, done: "Connection error", want: []string{"Connection error"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, ok := agent.Lookup(c.name)
			if !ok {
				t.Fatalf("no profile %q", c.name)
			}
			if c.policy != "" {
				b, err := os.ReadFile(root + c.policy)
				if err != nil || !strings.Contains(string(b), guard.ScriptPath(guard.HookPromptGate)) && !strings.Contains(string(b), guard.OpencodePluginURL) {
					t.Fatalf("cco-install's %s does not name the gate %s (%v):\n%s", c.policy, guard.ScriptPath(guard.HookPromptGate), err, b)
				}
			}
			run := ns.run
			if c.rpc {
				run = ns.runRPC
			}
			t.Run("shadow", func(t *testing.T) {
				u := ns.user(t, c.name, 65534)
				out := run(t, u, false, c.key, c.done, append([]string{root + BinDir + "/" + c.name}, c.args...))
				has(t, out, c.want, c.forbidden)
				if c.check != nil {
					c.check(t, out)
				}
			})
			if c.bareArgs == nil {
				return
			}
			t.Run("unwrapped", func(t *testing.T) {
				u := ns.user(t, c.name+"-unwrapped", c.bareUID)
				out := run(t, u, true, c.key, c.bareDone, append(p.Command(""), c.bareArgs...))
				has(t, out, c.bareWant, c.bareForbidden)
			})
		})
	}
}

// has checks out for every string of want and none of forbidden.
func has(t *testing.T, out string, want, forbidden []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("the output lacks %q:\n%s", w, out)
		}
	}
	for _, f := range forbidden {
		if strings.Contains(out, f) {
			t.Errorf("the output has %q:\n%s", f, out)
		}
	}
}

// claudeSessionStart checks, in Claude Code's stream-json, that the guard's
// SessionStart verifier reported the jail.
func claudeSessionStart(t *testing.T, out string) {
	t.Helper()
	start := ""
	for _, line := range strings.Split(out, "\n") {
		var ev struct{ Subtype, Hook_event, Output string }
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Subtype == "hook_response" && ev.Hook_event == "SessionStart" {
			start += ev.Output
		}
	}
	var verdict struct{ SystemMessage string }
	json.Unmarshal([]byte(start), &verdict)
	if !strings.HasPrefix(verdict.SystemMessage, "cco guard: inside a cco jail for claude") {
		t.Errorf("the guard's SessionStart verifier did not report the jail (its output: %q):\n%s", start, out)
	}
}

// targetNS starts commands in a mount and network namespace of their own
// that shows the system root's installed files at their target paths.
type targetNS struct {
	dir, root, etcLayer, libexecLayer string
}

// targetEtc are the root's /etc directories the namespace shows: cco's
// own and the vendors' policy directories.
var targetEtc = []string{filepath.Dir(sandbox.ConfigPath), filepath.Dir(managed.ClaudeDropinDir),
	filepath.Dir(managed.CodexRequirementsPath), managed.GeminiSettingsDir, managed.OpencodeConfigDir, managed.DroidSettingsDir}

func newTargetNS(t *testing.T, dir, root string) *targetNS {
	t.Helper()
	n := &targetNS{dir: dir, root: root, etcLayer: filepath.Join(dir, "etc-layer"), libexecLayer: filepath.Join(dir, "libexec-layer")}
	// The overlays' top layers hold the mount points.
	for _, d := range append(targetEtc, vendorfetch.LibexecDir) {
		layer := n.etcLayer
		if !strings.HasPrefix(d, "/etc/") {
			layer = n.libexecLayer
		}
		if _, err := os.Stat(root + d); err != nil {
			t.Fatalf("cco-install did not install %s: %v", d, err)
		}
		if err := os.MkdirAll(filepath.Join(layer, filepath.Base(d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// nsUser is who runs in the namespace, with a home and a workspace.
type nsUser struct {
	name         string
	uid          int
	home, ws, to string
}

func (n *targetNS) user(t *testing.T, agentName string, uid int) nsUser {
	t.Helper()
	base := filepath.Join(n.dir, agentName+"-"+strconv.Itoa(uid))
	u := nsUser{name: "root", uid: uid, home: filepath.Join(base, "home"), ws: filepath.Join(base, "ws"), to: filepath.Join(base, "out")}
	if uid != 0 {
		u.name = "nobody"
	}
	for _, d := range []string{u.home, u.ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(u.home, 0o700)
	// Unwrapped, OpenCode's config directory is root's, which nobody cannot
	// write: OpenCode's dependency install there fails at once instead of
	// waiting on the network (which stalls its plugins, cco's guard among
	// them), as the jail's read-only entries make it fail.
	// Through the shadow, the workspace has its .opencode: then the
	// dependency install there fails at once on the read-only package.json,
	// where in an in-memory .opencode (a workspace without one) it waits on
	// the network for about 70 s first (ADR 90).
	if agentName == vendorfetch.AgentOpencode {
		if err := os.Mkdir(filepath.Join(u.ws, ".opencode"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chown(filepath.Join(u.ws, ".opencode"), uid, uid)
	}
	if agentName == vendorfetch.AgentOpencode+"-unwrapped" {
		if err := os.MkdirAll(filepath.Join(u.home, ".config/opencode"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(u.home, ".config/opencode/.gitignore"), []byte("node_modules\n"), 0o644)
	}
	return u
}

// runRPC is run for an agent driven through JSON-RPC on its stdin (Droid's
// stream-jsonrpc): it starts a session, and once the session is up, sends
// one prompt ("hello").
func (n *targetNS) runRPC(t *testing.T, u nsUser, unwrapped bool, key []string, done string, argv []string) string {
	t.Helper()
	msg := func(id, method string, params map[string]any) string {
		b, _ := json.Marshal(map[string]any{"type": "request", "jsonrpc": "2.0", "factoryApiVersion": "1.0.0", "id": id, "method": method, "params": params})
		return string(b) + "\n"
	}
	init := msg("1", "droid.initialize_session", map[string]any{"machineId": "cco-test", "cwd": u.ws})
	prompt := msg("2", "droid.add_user_message", map[string]any{"text": "hello"})
	// A shell feeds the requests: the prompt only after the session's
	// answer is in the output file.
	feed := "printf '%s' \"$1\"; while ! grep -q '\"id\":\"1\",\"result\"' \"$3\" 2>/dev/null; do sleep 0.2; done; printf '%s' \"$2\"; sleep 120"
	wrapped := append([]string{"sh", "-c", "sh -c '" + strings.ReplaceAll(feed, "'", `'\''`) + "' sh \"$1\" \"$2\" \"$3\" | { shift 3; exec \"$@\"; }", "sh", init, prompt, u.to}, argv...)
	return n.run(t, u, unwrapped, key, done, wrapped)
}

// run starts argv in the namespace as u, in u's workspace, with key and a
// minimal environment, and waits until it exits, its output has done (when
// not ""), or 75 s pass; then it kills the process group and returns the output.
// unwrapped also hides the host's /run/cco (the jail marker's directory).
func (n *targetNS) run(t *testing.T, u nsUser, unwrapped bool, key []string, done string, argv []string) string {
	t.Helper()
	setup := `set -e
mount -t overlay cco-test-etc -o "lowerdir=$1:/etc" /etc
mount -t overlay cco-test-libexec -o "lowerdir=$2:/usr/libexec" /usr/libexec
for d in "$1"/*; do mount --bind "$3/etc/${d##*/}" "/etc/${d##*/}"; done
mount --bind "$3/usr/libexec/cco" /usr/libexec/cco
if [ "$4" = unwrapped ] && [ -e /run/cco ]; then mount -t tmpfs -o ro,mode=0755 cco-test-no-marker /run/cco; fi
shift 4
exec "$@"`
	mode := "shadow"
	if unwrapped {
		mode = "unwrapped"
	}
	args := []string{"--mount", "--net", "sh", "-c", setup, "sh", n.etcLayer, n.libexecLayer, n.root, mode}
	if u.uid != 0 {
		args = append(args, "setpriv", "--reuid="+strconv.Itoa(u.uid), "--regid="+strconv.Itoa(u.uid), "--clear-groups", "--")
	}
	c := exec.Command("unshare", append(args, argv...)...)
	c.Dir = u.ws
	c.Env = append([]string{"HOME=" + u.home, "USER=" + u.name, "PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", "LANG=C.UTF-8", "NO_COLOR=1"}, key...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	defer testenv.Launching(t)()
	return realagents.RunUntil(t, c, u.to, 75*time.Second, func(s string) bool { return done != "" && strings.Contains(s, done) })
}
