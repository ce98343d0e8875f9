package main

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// A first install on a terminal ends with the next step: cd into a project
// and run the agent installed, and how to log in. A second run, or a run
// whose output is not a terminal, ends with the report alone.
func TestFirstInstallSaysWhatNext(t *testing.T) {
	_, root, shadow, env := storeRoot(t, "claude")
	onTerminal := func(cmd *exec.Cmd) string {
		m, s := openPTY(t)
		cmd.Args = append(cmd.Args[:3], cmd.Args[4:]...) // the text report: drop --json
		cmd.Stdout = s
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s.Close()
		var out bytes.Buffer
		io.Copy(&out, m) // ends with EIO once the installer has exited
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		return strings.ReplaceAll(out.String(), "\r\n", "\n")
	}
	out := onTerminal(installer(t, root, shadow, env))
	for _, want := range []string{
		"\nnext: cd into a project and run an agent; it starts in its jail:\n  cd ~/src/my-project\n  claude\n",
		"log in: each agent asks on its first start",
		"Or export an API key before you start it: claude ANTHROPIC_API_KEY.",
		"docs/how-to/first-login.md",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the first install's last lines lack %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(strings.TrimRight(out, "\n"), "first-login.md") {
		t.Errorf("the next step is not the last thing said:\n%s", out)
	}
	if again := onTerminal(installer(t, root, shadow, env)); strings.Contains(again, "next:") {
		t.Errorf("a second run names the next step again:\n%s", again)
	}
	_, root2, _, _ := storeRoot(t, "claude")
	cmd := installer(t, root2, shadow, env)
	cmd.Args = append(cmd.Args[:3], cmd.Args[4:]...)
	var plain bytes.Buffer
	cmd.Stdout = &plain
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "next:") {
		t.Errorf("a first install without a terminal names the next step:\n%s", plain.String())
	}
}
