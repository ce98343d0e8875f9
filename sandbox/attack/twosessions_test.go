package attack

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/jailtest"
)

// TestTwoSessionsInOneWorkspace: claude and codex in one repository that
// has none of the agents' directories, the second started while the first
// runs, ending in either order. The host's verdict: all ran; when the last
// has ended the workspace holds what it held and what the sessions wrote,
// nothing more (no empty .claude, .codex, .gemini or .opencode left), and
// neither session's audit reports anything (the other's placeholders
// among them).
func TestTwoSessionsInOneWorkspace(t *testing.T) {
	r := shared.Get(t)
	for _, u := range users {
		for _, firstEnds := range []bool{true, false} {
			order := "first-ends-first"
			if !firstEnds {
				order = "second-ends-first"
			}
			t.Run(u.Name+"/"+order, func(t *testing.T) {
				t.Parallel()
				w := jailtest.NewWorld(t, u)
				ws := filepath.Join(w.Base, "ws")
				if err := os.Mkdir(ws, 0o755); err != nil {
					t.Fatal(err)
				}
				os.WriteFile(ws+"/README", []byte("a project\n"), 0o644)
				gitcfg := "[user]\n\tname = T\n\temail = t@example.org\n[init]\n\tdefaultBranch = main\n"
				os.WriteFile(w.Home+"/.gitconfig", []byte(gitcfg), 0o644)
				for _, args := range [][]string{{"init", "-q"}, {"add", "README"}, {"commit", "-qm", "start"}} {
					c := exec.Command("git", args...)
					c.Dir, c.Env = ws, []string{"HOME=" + w.Home, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
					if out, err := c.CombinedOutput(); err != nil {
						t.Fatalf("git %v: %v\n%s", args, err, out)
					}
				}
				w.Own(t)
				before := walk(t, ws)

				wait := func(label string) probe {
					return probe{Steps: steps("write", "echo "+label+" > "+label+".txt"),
						Swap: &swapParams{Ready: filepath.Join(ws, "."+label+"-ready"), Until: filepath.Join(ws, "."+label+"-until")}}
				}
				var wg sync.WaitGroup
				results := map[string]*jailtest.Result{"a": {}, "b": {}}
				done := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
				start := func(label, agent string) {
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer close(done[label])
						*results[label] = jailtest.Run(t, w.Cmd(r, agent, ws, "probe", wait(label).arg()), 90*time.Second)
					}()
					for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
						if _, err := os.Stat(filepath.Join(ws, "."+label+"-ready")); err == nil {
							return
						}
					}
					t.Errorf("session %s (%s) never started", label, agent)
				}
				end := func(label string) {
					os.WriteFile(filepath.Join(ws, "."+label+"-until"), nil, 0o644)
					select {
					case <-done[label]:
					case <-time.After(60 * time.Second):
						t.Errorf("session %s did not end", label)
					}
				}
				start("a", "claude")
				time.Sleep(time.Second)
				start("b", "codex")
				if firstEnds {
					end("a")
					time.Sleep(500 * time.Millisecond)
					end("b")
				} else {
					end("b")
					time.Sleep(500 * time.Millisecond)
					end("a")
				}
				wg.Wait()
				for _, label := range []string{"a", "b"} {
					res := results[label]
					if res.Code != 0 || res.Report == nil || !strings.HasPrefix(res.Report["sh:write"], "exit 0") {
						t.Errorf("session %s: exit %d\nstdout %s\nstderr %s", label, res.Code, res.Stdout, res.Stderr)
					}
					if strings.Contains(res.Stderr, "WARNING") {
						t.Errorf("session %s's audit reports what no session wrote:\n%s", label, res.Stderr)
					}
				}
				want := append(slices.Clone(before), "a.txt", "b.txt", ".a-ready", ".a-until", ".b-ready", ".b-until")
				slices.Sort(want)
				if got := walk(t, ws); !slices.Equal(got, want) {
					t.Errorf("after both sessions the workspace holds\n%v\nwant\n%v", got, want)
				}
			})
		}
	}
}

// walk lists a tree's paths below dir, relative, without .git's inside.
func walk(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		if d.IsDir() && rel == ".git" {
			return filepath.SkipDir
		}
		return nil
	})
	slices.Sort(out)
	return out
}
