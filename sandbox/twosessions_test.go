package sandbox

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
)

// asOther hands a Prepared session's record to a live process of its own,
// as if another launcher held it; the returned func ends that process.
func asOther(t *testing.T, s *Session) func() {
	t.Helper()
	c := exec.Command("sleep", "60")
	testenv.Must(t, c.Start())
	s.rec.PID, s.rec.Start = c.Process.Pid, procStart(c.Process.Pid)
	old := s.recPath
	s.recPath = filepath.Join(filepath.Dir(old), strconv.Itoa(c.Process.Pid)+".json")
	b, _ := json.Marshal(&s.rec)
	testenv.Must(t, os.WriteFile(s.recPath, b, 0o600))
	os.Remove(old)
	return func() { c.Process.Kill(); c.Wait() }
}

// tree lists every path below dir.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestTwoSessionsMakeNothingForEachOther: a second launch in a workspace
// where another session's placeholders stand plans them as that session
// did (an agent directory it made is missing to both), so it makes nothing
// there that the first session's audit would find; when the last ends, the
// workspace holds what it held before either.
func TestTwoSessionsMakeNothingForEachOther(t *testing.T) {
	f := newFixture(t)
	for _, d := range []string{".claude", ".codex", ".gemini", ".opencode", ".github"} {
		testenv.Must(t, os.RemoveAll(filepath.Join(f.ws, d)))
	}
	before := tree(t, f.ws)
	a, _ := prep(t, f, "codex")
	endA := asOther(t, a)
	defer endA()
	mid := tree(t, f.ws)
	b, _ := prep(t, f, "claude")
	endB := asOther(t, b)
	defer endB()
	if got := tree(t, f.ws); !slices.Equal(got, mid) {
		t.Errorf("the second launch made files in the first one's workspace:\n%v\nwas\n%v", got, mid)
	}
	b.Finish()
	endB()
	if got := tree(t, f.ws); !slices.Equal(got, mid) {
		t.Errorf("the second session, ending first, removed the first one's placeholders:\n%v\nwas\n%v", got, mid)
	}
	a.Finish()
	endA()
	if got := tree(t, f.ws); !slices.Equal(got, before) {
		t.Errorf("after both sessions the workspace holds\n%v\nwas\n%v", got, before)
	}
}

// TestRacedRefusal: a mount point on a way that a live session could swap
// (a repository it made after its start) refuses the next launch before it
// makes anything, naming the path and the session; one that the session
// holds as a mount point does not.
func TestRacedRefusal(t *testing.T) {
	f := newFixture(t)
	a, _ := prep(t, f, "codex")
	endA := asOther(t, a)
	defer endA()
	testenv.Must(t, os.MkdirAll(f.ws+"/s1/.git", 0o700))
	p, _ := agent.Lookup("claude")
	_, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws})
	testenv.Must(t, err)
	before := tree(t, f.ws)
	_, err = Prepare(f.home, "", pr)
	var re *errRaced
	if !asRaced(err, &re) || re.pid != a.rec.PID || !slices.Contains([]string{f.ws + "/s1", f.ws + "/s1/.git"}, re.path) {
		t.Fatalf("Prepare: %v, want the refusal naming s1 and session %d", err, a.rec.PID)
	}
	if got := tree(t, f.ws); !slices.Equal(got, before) {
		t.Errorf("the refused launch made %v", got)
	}
	testenv.Must(t, os.RemoveAll(f.ws+"/s1"))
	_, pr, err = Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws})
	testenv.Must(t, err)
	s, err := Prepare(f.home, "", pr)
	testenv.Must(t, err)
	s.Finish()
}

func asRaced(err error, re **errRaced) bool {
	r, ok := err.(*errRaced)
	*re = r
	return ok
}

// TestWorktreeAndMainCheckoutTogether: a session in a linked worktree and
// one in the main checkout, in either order, both launch: each pins the
// way to its mount points in the common directory (worktrees/<name>), so
// neither could swap the other's.
func TestWorktreeAndMainCheckoutTogether(t *testing.T) {
	for _, wtFirst := range []bool{true, false} {
		f := newFixture(t)
		main := f.ws
		wt := filepath.Join(filepath.Dir(f.ws), "wt")
		admin := main + "/.git/worktrees/wt"
		testenv.Must(t, os.MkdirAll(admin, 0o700))
		testenv.Must(t, os.MkdirAll(wt, 0o700))
		testenv.Must(t, os.WriteFile(wt+"/.git", []byte("gitdir: "+admin+"\n"), 0o600))
		testenv.Must(t, os.WriteFile(admin+"/gitdir", []byte(wt+"/.git\n"), 0o600))
		testenv.Must(t, os.WriteFile(admin+"/commondir", []byte("../..\n"), 0o600))
		testenv.Must(t, os.WriteFile(admin+"/HEAD", []byte("ref: refs/heads/side\n"), 0o600))
		first, second := main, wt
		if wtFirst {
			first, second = wt, main
		}
		p, _ := agent.Lookup("claude")
		_, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: first})
		testenv.Must(t, err)
		a, err := Prepare(f.home, "", pr)
		testenv.Must(t, err)
		endA := asOther(t, a)
		q, _ := agent.Lookup("codex")
		_, pr, err = Plan(&Launch{Profile: q, Config: &Config{}, Home: f.home, Cwd: second})
		testenv.Must(t, err)
		b, err := Prepare(f.home, "", pr)
		if err != nil {
			t.Errorf("worktree first %v: the second launch: %v", wtFirst, err)
		} else {
			b.Finish()
		}
		endA()
	}
}
