package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/realagents"
	"github.com/cco-dev/cco/internal/testenv"
)

// The real Codex through the shadow, as root and as uid 65534, driven by a
// stand-in for the Responses API on the jail's own loopback (egress is
// off), configured as Codex documents it (a model_providers entry's
// base_url in ~/.codex/config.toml): the model asks its shell tool to run
// `go version` and a `git commit`. Codex runs them in a login shell
// (`bash -lc`), whose /etc/profile would reset PATH: the tool's answer,
// which the stand-in logs in the workspace, shows go found and the commit
// made with the user's identity. Verdicts from that log and the host's git
// log.
func TestRealCodexShellKeepsPathAndIdentity(t *testing.T) {
	realagents.Require(t)
	tree, err := filepath.Abs(filepath.Join(realagents.Dir(t, realagents.Codex), realagents.CodexTree))
	if err != nil {
		t.Fatal(err)
	}
	testenv.RequireRoot(t)
	testenv.RequireBwrap(t)
	if _, err := os.Stat("/usr/local/go/bin/go"); err != nil {
		t.Fatalf("no /usr/local/go/bin/go: the test runs the host's Go in the jail (%v)", err)
	}
	root, err := buildRoot()
	t.Cleanup(func() { os.RemoveAll(root) })
	if err != nil {
		t.Fatal(err)
	}
	standin := filepath.Join(root, "usr/libexec/cco/codex-dist/modelapi")
	if out, err := exec.Command(goTool(), "build", "-o", standin, "./testdata/modelapi").CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in: %v\n%s", err, out)
	}
	current := filepath.Join(root, "usr/libexec/cco/codex-dist/current")
	must(t, os.RemoveAll(current))
	must(t, os.MkdirAll(filepath.Join(current, "bin"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "etc/cco/sandbox.toml"), []byte("egress = \"off\"\n"), 0o644))
	const port = "38918"
	for _, u := range []runAs{asNobody, asRoot} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			logPath := filepath.Join(w.ws, "modelapi.log")
			cmd := `command -v go; go version; cd ` + w.ws + ` && git init -q shellrepo && cd shellrepo && git -c commit.gpgsign=false commit -q --allow-empty -m from-codex && git log -1 --format='ident=%an <%ae>'`
			// The agent's binary: the stand-in first, in the jail's network
			// namespace, then the real Codex.
			wrapper := "#!/bin/bash\n" + standin + " -addr 127.0.0.1:" + port + " -log " + logPath + " -cmd " + shellQuote(cmd) + " &\n" +
				"i=0; while ! (exec 3<>/dev/tcp/127.0.0.1/" + port + ") 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done\nexec " + tree + "/bin/codex \"$@\"\n"
			must(t, os.WriteFile(filepath.Join(current, "bin/codex"), []byte(wrapper), 0o755))
			w.hostFile(t, "home/.codex/config.toml", `model = "gpt-5-codex"
model_provider = "standin"
[model_providers.standin]
name = "standin"
base_url = "http://127.0.0.1:`+port+`/v1"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
`, 0o644)
			c := w.cmd(root, "codex", w.ws, "exec", "--skip-git-repo-check", "run it")
			c.Env = append(withPath(c.Env, "/usr/local/go/bin:/usr/bin:/bin"), "OPENAI_API_KEY=sk-dummy-key-for-an-offline-test", "NO_COLOR=1")
			defer testenv.Launching(t)()
			text := realagents.RunUntil(t, c, filepath.Join(w.base, "codex.out"), 120*time.Second, func(s string) bool { return strings.Contains(s, "All done.") })
			b, _ := os.ReadFile(logPath)
			log := string(b)
			i := strings.Index(log, `"function_call_output"`)
			if !strings.Contains(text, "All done.") || i < 0 {
				t.Fatalf("codex did not answer the tool call:\n%s\nthe stand-in's log:\n%.3000s", text, log)
			}
			answer := log[i:min(len(log), i+1500)]
			if !strings.Contains(answer, "/usr/local/go/bin/go") || !strings.Contains(answer, "go version go1.") {
				t.Errorf("as %s, go was not found in codex's login shell: %s", u.name, answer)
			}
			if !strings.Contains(answer, "ident=Nobody Tester <nobody@example.org>") {
				t.Errorf("as %s, the commit in codex's shell lacks the user's identity: %s", u.name, answer)
			}
			out, err := exec.Command("git", "-c", "safe.directory=*", "-C", w.ws+"/shellrepo", "log", "-1", "--format=%an <%ae>").Output()
			if err != nil || strings.TrimSpace(string(out)) != "Nobody Tester <nobody@example.org>" {
				t.Errorf("the host's git log of the jail's commit: %q %v", out, err)
			}
		})
	}
}
