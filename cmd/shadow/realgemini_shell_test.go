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

// The real Gemini CLI through the shadow, as root and as uid 65534, driven
// by a stand-in for the Gemini API on the jail's own loopback (egress is
// off: not one packet leaves): the model asks its shell tool to run
// `go version` and a `git commit`, and the tool's answer, which the
// stand-in logs in the workspace, shows go on the jail's PATH and the
// commit made with the user's identity although Gemini CLI's shell sets
// git's config files to /dev/null. Verdicts from that log and the host's
// git log.
func TestRealGeminiShellKeepsPathAndIdentity(t *testing.T) {
	realagents.Require(t)
	pkg := filepath.Join(realagents.Dir(t, realagents.Gemini), "package")
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
	node, err := exec.LookPath("node")
	if err == nil {
		node, err = filepath.EvalSymlinks(node)
	}
	if err != nil {
		t.Fatalf("node: %v (fix: apt-get install nodejs)", err)
	}
	standin := filepath.Join(root, "usr/libexec/cco/gemini/modelapi")
	if out, err := exec.Command(goTool(), "build", "-o", standin, "./testdata/modelapi").CombinedOutput(); err != nil {
		t.Fatalf("building the stand-in: %v\n%s", err, out)
	}
	abs, err := filepath.Abs(pkg)
	if err != nil {
		t.Fatal(err)
	}
	current := filepath.Join(root, "usr/libexec/cco/gemini/current")
	must(t, os.RemoveAll(current))
	must(t, os.Mkdir(current, 0o755))
	must(t, os.Symlink(filepath.Join(abs, "bundle"), filepath.Join(current, "bundle")))
	must(t, os.Symlink(filepath.Join(abs, "package.json"), filepath.Join(current, "package.json")))
	must(t, os.WriteFile(filepath.Join(root, "etc/cco/sandbox.toml"), []byte("egress = \"off\"\n"), 0o644))
	const port = "38917"
	for _, u := range []runAs{asNobody, asRoot} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			logPath := filepath.Join(w.ws, "modelapi.log")
			cmd := `go version; cd ` + w.ws + ` && git init -q shellrepo && cd shellrepo && git -c commit.gpgsign=false commit -q --allow-empty -m from-gemini && git log -1 --format='ident=%an <%ae>'`
			// The interpreter the profile runs: the stand-in first, in the
			// jail's network namespace, then the host's Node.
			wrapper := "#!/bin/sh\n" + standin + " -addr 127.0.0.1:" + port + " -log " + logPath + " -cmd " + shellQuote(cmd) + " &\n" +
				"i=0; while ! (exec 3<>/dev/tcp/127.0.0.1/" + port + ") 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done\nexec " + node + " \"$@\"\n"
			must(t, os.WriteFile(filepath.Join(current, "node"), []byte(strings.Replace(wrapper, "#!/bin/sh", "#!/bin/bash", 1)), 0o755))
			w.hostFile(t, "home/.gemini/settings.json", `{"security":{"auth":{"selectedType":"gemini-api-key"}}}`, 0o644)
			c := w.cmd(root, "gemini", w.ws, "-p", "run it", "--yolo")
			c.Env = append(withPath(c.Env, "/usr/local/go/bin:/usr/bin:/bin"), "GEMINI_API_KEY=dummy-key-for-an-offline-test",
				"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:"+port, "NO_COLOR=1")
			defer testenv.Launching(t)()
			text := realagents.RunUntil(t, c, filepath.Join(w.base, "gemini.out"), 120*time.Second, func(s string) bool { return strings.Contains(s, "All done.") })
			b, _ := os.ReadFile(logPath)
			log := string(b)
			if !strings.Contains(text, "All done.") || !strings.Contains(log, `"functionResponse":`) {
				t.Fatalf("gemini did not answer the tool call:\n%s\nthe stand-in's log:\n%.3000s", text, log)
			}
			i := strings.Index(log, `"functionResponse":`)
			answer := log[i:min(len(log), i+2000)]
			if !strings.Contains(answer, "go version go1.") {
				t.Errorf("as %s, go was not found in gemini's shell: %s", u.name, answer)
			}
			if !strings.Contains(answer, "ident=Nobody Tester <nobody@example.org>") {
				t.Errorf("as %s, the commit in gemini's shell lacks the user's identity: %s", u.name, answer)
			}
			out, err := exec.Command("git", "-c", "safe.directory=*", "-C", w.ws+"/shellrepo", "log", "-1", "--format=%an <%ae>").Output()
			if err != nil || strings.TrimSpace(string(out)) != "Nobody Tester <nobody@example.org>" {
				t.Errorf("the host's git log of the jail's commit: %q %v", out, err)
			}
		})
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
