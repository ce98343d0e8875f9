package attack

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/internal/testenv"
)

// swapParams is the probe's Swap (testdata/probe).
type swapParams struct {
	Paths   []string `json:"paths"`
	Targets []string `json:"targets"`
	Ready   string   `json:"ready"`
	Until   string   `json:"until"`
	Rebuild string   `json:"rebuild"`
	Every   int      `json:"every"`
}

// raceLaunches is how many launches each user's race makes.
const raceLaunches = 120

// TestLaunchRace: a session swaps every directory on the way to every
// mount point in its workspace for a link to a host directory
// (renameat2 RENAME_EXCHANGE, in a tight loop), a repository it made after
// its own start among them, made and removed again and again, while the
// next launches in the same workspace are planned, prepared and built. The
// verdict is the host's: nothing is ever created in the decoy directories
// the links point to (as the host path, and as bwrap sees the host through
// /oldroot, dangling or not), and each launch either ran with the
// workspace's protected files still protected, or was refused naming the
// path the other session could swap (docs/adr/0120-mount-points-on-descriptors.md).
func TestLaunchRace(t *testing.T) {
	testenv.RequireRoot(t)
	r := shared.Get(t)
	for _, u := range users {
		t.Run(u.Name, func(t *testing.T) {
			t.Parallel()
			raceOne(t, r, u)
		})
	}
}

func raceOne(t *testing.T, r *jailtest.Root, u jailtest.RunAs) {
	defer testenv.Launching(t)()
	w := newWorld(t, u)
	decoy := filepath.Join(w.Base, "decoy")
	if err := os.Mkdir(decoy, 0o777); err != nil {
		t.Fatal(err)
	}
	// Writable by root's jail's unprivileged uid too (ADR 18): a file
	// bwrap made there would show.
	os.Chmod(decoy, 0o777)
	os.Lchown(decoy, u.UID, u.GID)
	targets := []string{decoy, "/oldroot" + decoy, decoy + "/made-by-path", "/oldroot" + decoy + "/made-by-bwrap"}

	// Every directory of the workspace (the repository, its git
	// directory, the nested ones, the agents' directories), and the
	// repository the session makes after its start with its own.
	var swapped []string
	filepath.WalkDir(w.ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Contains(p, "/objects") || strings.Contains(p, "/refs") || strings.Contains(p, "/logs") {
			return filepath.SkipDir
		}
		if p != w.ws {
			swapped = append(swapped, p)
		}
		return nil
	})
	s1 := filepath.Join(w.ws, "s1")
	swapped = append(swapped, s1, s1+"/.git", s1+"/.git/hooks", s1+"/.git/info")
	configBefore, err := os.ReadFile(w.ws + "/.git/config")
	if err != nil {
		t.Fatal(err)
	}
	hooksBefore := names(t, w.ws+"/.git/hooks")

	ready, until := filepath.Join(w.ws, ".race-ready"), filepath.Join(w.ws, ".race-until")
	a := probe{Swap: &swapParams{Paths: swapped, Targets: targets, Ready: ready, Until: until,
		Rebuild: "if [ -d s1 ]; then rm -rf s1; else git init -q s1; fi", Every: 700}}
	var wg sync.WaitGroup
	var ra jailtest.Result
	wg.Add(1)
	go func() {
		defer wg.Done()
		ra = jailtest.Run(t, w.Cmd(r, "codex", w.ws, "probe", a.arg()), 3*time.Minute)
	}()
	defer func() {
		os.WriteFile(until, nil, 0o644)
		wg.Wait()
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			os.WriteFile(until, nil, 0o644)
			wg.Wait()
			t.Fatalf("the swapping session never started: exit %d\nstdout %s\nstderr %s", ra.Code, ra.Stdout, ra.Stderr)
		}
	}

	// Each launch tries what a session would if the protection had gone
	// elsewhere: the repository's config and hooks.
	b := probe{Steps: []step{{Name: "write", Sh: "echo '[alias] x = !touch /tmp/x' >> .git/config && echo WROTE-config; " +
		"echo x > .git/hooks/pre-commit.race && echo WROTE-hook; cat .git/config >/dev/null && echo READ-config; true"},
		{Name: "mounts", Sh: "cut -d' ' -f5 /proc/self/mountinfo | grep -F " + shq(decoy) + " || true"}}}
	ran, refused := 0, 0
	for i := 0; i < raceLaunches; i++ {
		name := []string{"claude", "gemini", "codex"}[i%3]
		res := jailtest.Run(t, w.Cmd(r, name, w.ws, "probe", b.arg()), launchTimeout)
		switch {
		case res.Code == 0 && res.Report != nil:
			ran++
			for _, l := range othersWarnings(res.Stderr) {
				t.Errorf("launch %d (%s) reported what no session did: %s", i, name, l)
			}
			out := res.Report["sh:write"]
			if strings.Contains(out, "WROTE") || !strings.Contains(out, "READ-config") {
				t.Errorf("launch %d (%s): the workspace's git files were not protected: %s", i, name, out)
			}
			if m := res.Report["sh:mounts"]; m != "exit 0: " {
				t.Errorf("launch %d (%s) mounted onto the decoy, outside the workspace: %s", i, name, m)
			}
		case strings.Contains(res.Stderr, "lies in a tree that the running session"):
			refused++
			if refused <= 3 {
				t.Logf("launch %d refused: %s", i, res.Stderr)
			}
		default:
			t.Errorf("launch %d (%s): exit %d\nstdout %s\nstderr %s", i, name, res.Code, res.Stdout, res.Stderr)
		}
	}
	os.WriteFile(until, nil, 0o644)
	wg.Wait()
	t.Logf("%d launches ran, %d were refused; the swapping session: exit %d, %s rounds, stderr %s", ran, refused, ra.Code, ra.Report["rounds"], ra.Stderr)
	// The swapping session made s1 and its links itself; the launches'
	// placeholders are no session's doing, and its audit names none.
	for _, l := range othersWarnings(ra.Stderr) {
		t.Errorf("the swapping session's audit names what another launch made: %s", l)
	}
	made := 0
	for k, v := range ra.Report {
		if strings.HasPrefix(k, "swap:") {
			n, _ := strconv.Atoi(strings.Fields(v + " 0")[0])
			made += n
			if n > 0 {
				t.Logf("swapped %s %d times", strings.TrimPrefix(k, "swap:"), n)
			}
		}
	}
	if made == 0 {
		t.Fatalf("the session swapped nothing: the race did not run (report %v)", ra.Report)
	}

	// The host's verdict.
	if got := names(t, decoy); len(got) != 0 {
		t.Errorf("a launch created %v in the decoy directory %s, outside the workspace", got, decoy)
	}
	if after, _ := os.ReadFile(w.ws + "/.git/config"); string(after) != string(configBefore) {
		t.Errorf("the workspace's .git/config changed:\n%s", after)
	}
	if got := names(t, w.ws+"/.git/hooks"); strings.Join(got, " ") != strings.Join(hooksBefore, " ") {
		t.Errorf("the workspace's hooks changed: %v, were %v", got, hooksBefore)
	}
	for _, p := range swapped {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			t.Errorf("%s is still a link after the race", p)
		}
	}
	if ran == 0 {
		t.Errorf("no launch ran: the race never reached bubblewrap")
	}
}

// othersWarnings are the lines of a launch's warnings that name a path
// other than the swapping session's own repository and links.
func othersWarnings(stderr string) []string {
	if !strings.Contains(stderr, "WARNING") {
		return nil
	}
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "/") && !strings.Contains(l, "/s1") && !strings.Contains(l, ".cco-swap") {
			out = append(out, l)
		}
	}
	return out
}

// names lists a directory (nil when it is missing).
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
