package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/realagents"
	"github.com/cco-dev/cco/internal/testenv"
)

// realRoot is a system root like the shared one, with the real codex
// (from its npm pack) as the installed codex.
var realRoot struct {
	once sync.Once
	root string
	err  error
}

func codexRoot(t *testing.T) string {
	t.Helper()
	testenv.RequireBwrap(t)
	tree := filepath.Join(realagents.Dir(t, realagents.Codex), realagents.CodexTree)
	realRoot.once.Do(func() {
		realRoot.root, realRoot.err = buildRoot()
		if realRoot.err != nil {
			return
		}
		cur := filepath.Join(realRoot.root, "usr/libexec/cco/codex-dist/current")
		if realRoot.err = os.RemoveAll(cur); realRoot.err == nil {
			realRoot.err = os.Symlink(tree, cur)
		}
	})
	if realRoot.err != nil {
		t.Fatal(realRoot.err)
	}
	return realRoot.root
}

var stateRE = regexp.MustCompile(`[?&]state=([A-Za-z0-9_-]+)`)

// TestCodexLoginCallbackThroughTheJail: `codex login` through the shadow
// starts its callback server in the jail; the browser's redirect, sent
// here from the host's loopback, reaches it. With a wrong state codex
// answers 400 and keeps waiting; with the printed one it takes the code
// and tries to exchange it, which fails with no network (egress off: the
// jail has only lo, so nothing leaves the machine).
func TestCodexLoginCallbackThroughTheJail(t *testing.T) {
	realagents.Require(t)
	testenv.RequireRoot(t)
	root := codexRoot(t)
	withConfig(t, root, "egress = \"off\"\n")
	// Root's launch reaches the jail with setns, an unprivileged user's
	// through nsenter into the user namespace that owns the jail's network.
	for _, u := range []runAs{asRoot, asNobody} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			c := w.cmd(root, "codex", w.ws, "login")
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			c.Stdout, c.Stderr, c.Stdin = pw, pw, nil
			defer testenv.Launching(t)()
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			t.Cleanup(func() { c.Process.Kill(); c.Wait() })
			var out strings.Builder
			lines := make(chan string, 64)
			go func() {
				sc := bufio.NewScanner(pr)
				sc.Buffer(make([]byte, 64<<10), 1<<20)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			state := ""
			timeout := time.After(60 * time.Second)
			for state == "" {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("codex ended before printing the login URL:\n%s", out.String())
					}
					out.WriteString(l + "\n")
					if strings.Contains(l, "redirect_uri=http%3A%2F%2F127.0.0.1%3A1455%2Fauth%2Fcallback") {
						if m := stateRE.FindStringSubmatch(l); m != nil {
							state = m[1]
						}
					}
				case <-timeout:
					t.Fatalf("no login URL:\n%s", out.String())
				}
			}
			// The browser is the invoking user's: only its connections are
			// carried in (docs/adr/0054-login-callback-forwarding.md).
			get := func(q string) (int, error) { return getAs(u, "http://127.0.0.1:1455/auth/callback?"+q) }
			var code int
			for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if code, err = get("code=x&state=not-the-state"); err == nil || time.Now().After(end) {
					break
				}
			}
			if err != nil || code != http.StatusBadRequest {
				t.Fatalf("a wrong state from the host's loopback: %d, %v; want codex's 400\n%s", code, err, out.String())
			}
			// The right state: codex takes the code and answers once its
			// exchange has failed; the answer itself does not matter.
			get("code=x&state=" + state)
			done := make(chan error, 1)
			go func() {
				for l := range lines {
					out.WriteString(l + "\n")
				}
				done <- c.Wait()
			}()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("codex did not end after the callback:\n%s", out.String())
			}
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || !strings.Contains(out.String(), "Token exchange") {
				t.Fatalf("codex: %v; want it to fail exchanging the code it received\n%s", err, out.String())
			}
			// Its server is gone, and so is the host's port.
			if _, err := get("code=x&state=" + state); err == nil {
				t.Error("127.0.0.1:1455 still answers after the login ended")
			}
		})
	}
}

// getAs is an HTTP GET made by a process of u's (curl, through setpriv),
// so that the host's socket table shows u as the connection's owner: its
// status, or an error when nothing answered.
func getAs(u runAs, url string) (int, error) {
	c := exec.Command("setpriv", "--reuid", strconv.Itoa(u.uid), "--regid", strconv.Itoa(u.gid), "--clear-groups",
		"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", url)
	out, err := c.Output()
	code, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if code == 0 {
		return 0, fmt.Errorf("no answer from %s (curl: %v)", url, err)
	}
	return code, nil
}
