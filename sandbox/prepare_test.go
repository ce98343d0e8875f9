package sandbox

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
)

func prep(t *testing.T, f *fixture, name string) (*Session, *Prep) {
	t.Helper()
	p, _ := agent.Lookup(name)
	rt, err := os.MkdirTemp(t.TempDir(), "cco-jail-")
	testenv.Must(t, err)
	_, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws})
	testenv.Must(t, err)
	s, err := Prepare(f.home, rt, pr)
	testenv.Must(t, err)
	return s, pr
}

func TestPreparePlaceholdersAndFinish(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.RemoveAll(f.ws+"/.git/hooks"))
	testenv.Must(t, os.Remove(f.ws+"/.git/config"))
	testenv.Must(t, os.RemoveAll(f.home+"/.claude"))
	s, _ := prep(t, f, "claude")
	for _, p := range []string{f.ws + "/.git/hooks", f.ws + "/.git/config", f.home + "/.claude/settings.json"} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("placeholder %s not created: %v", p, err)
		}
	}
	if fi, err := os.Stat(f.home + "/.claude"); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("login dir: %v %v", fi, err)
	}
	recs, _ := os.ReadDir(registryDir(f.home))
	if len(recs) != 1 {
		t.Fatalf("records %v", recs)
	}
	s.Finish()
	for _, p := range []string{f.ws + "/.git/hooks", f.ws + "/.git/config", s.rec.Runtime} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", p, err)
		}
	}
	// The login state's stand-ins stay: a session must never be able to
	// create them.
	if b, err := os.ReadFile(f.home + "/.claude/settings.json"); err != nil || string(b) != "{}\n" {
		t.Errorf("~/.claude/settings.json after the session: %q %v, want the kept stand-in {}", b, err)
	}
	if recs, _ := filepath.Glob(filepath.Join(registryDir(f.home), "*.json")); len(recs) != 0 {
		t.Errorf("records left %v", recs)
	}
}

func TestFinishKeepsWhatSomeoneWrote(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.Remove(f.ws+"/.git/config"))
	testenv.Must(t, os.RemoveAll(f.ws+"/.git/hooks"))
	s, _ := prep(t, f, "codex")
	testenv.Must(t, os.WriteFile(f.ws+"/.git/config", []byte("[core]\n"), 0o600))
	testenv.Must(t, os.WriteFile(f.ws+"/.git/hooks/pre-commit", []byte("x"), 0o700))
	s.Finish()
	for _, p := range []string{f.ws + "/.git/config", f.ws + "/.git/hooks/pre-commit"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}

func TestCleanStale(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.Remove(f.ws+"/.git/config"))
	// A launch by a process that is gone: the record of a dead pid.
	c := exec.Command("true")
	testenv.Must(t, c.Run())
	dead := c.Process.Pid
	s, _ := prep(t, f, "codex")
	live := s.recPath
	s.rec.PID, s.rec.Start = dead, "1"
	s.recPath = filepath.Join(registryDir(f.home), "dead.json")
	testenv.Must(t, s.writeRecord())
	testenv.Must(t, os.Remove(live))
	// A live launch (this process) whose placeholder must stay.
	testenv.Must(t, os.Remove(f.ws+"/.codex/config.toml"))
	// The next launch takes the dead one's placeholders over (its plan may
	// already bind them as existing files) and removes them when it ends.
	s2, _ := prep(t, f, "codex")
	if _, err := os.Lstat(s.rec.Runtime); !os.IsNotExist(err) {
		t.Errorf("stale runtime dir kept: %v", err)
	}
	if _, err := os.Lstat(f.ws + "/.git/config"); err != nil {
		t.Errorf("a placeholder the next launch may bind was removed at its start: %v", err)
	}
	CleanStale(f.home)
	if _, err := os.Lstat(f.ws + "/.codex/config.toml"); err != nil {
		t.Errorf("a live launch's placeholder was removed: %v", err)
	}
	s2.Finish()
	if _, err := os.Lstat(f.ws + "/.git/config"); !os.IsNotExist(err) {
		t.Errorf("the stale placeholder outlived the next launch: %v", err)
	}
}

func TestCarryOver(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.WriteFile(f.home+"/.claude.json", []byte(`{"oauth":1}`), 0o600))
	s, _ := prep(t, f, "claude")
	defer s.Finish()
	b, err := os.ReadFile(f.home + "/.claude/.claude.json")
	if err != nil || string(b) != `{"oauth":1}` {
		t.Fatalf("carried over: %q %v", b, err)
	}
	if _, err := os.Stat(f.home + "/.claude.json"); err != nil {
		t.Errorf("original not kept: %v", err)
	}
	// Once only: a later host file does not overwrite the jail's copy.
	testenv.Must(t, os.WriteFile(f.home+"/.claude.json", []byte(`{"oauth":2}`), 0o600))
	s2, _ := prep(t, f, "claude")
	defer s2.Finish()
	if b, _ := os.ReadFile(f.home + "/.claude/.claude.json"); string(b) != `{"oauth":1}` {
		t.Errorf("carried over twice: %q", b)
	}
}

func TestAddedCommandEntries(t *testing.T) {
	f := newFixture(t)
	state := f.home + "/.claude/.claude.json"
	write := func(v any) {
		b, _ := json.Marshal(v)
		testenv.Must(t, os.WriteFile(state, b, 0o600))
	}
	write(map[string]any{"mcpServers": map[string]any{"old": map[string]any{"command": "/bin/old"}}})
	s, _ := prep(t, f, "claude")
	defer s.Finish()
	if a := s.Added(); len(a) != 0 {
		t.Errorf("nothing added yet: %q", a)
	}
	write(map[string]any{
		"mcpServers": map[string]any{"old": map[string]any{"command": "/bin/old"}, "evil": map[string]any{"command": "/tmp/x", "args": []string{"-y"}},
			"url": map[string]any{"type": "http", "url": "https://x"}},
		"projects": map[string]any{"/w": map[string]any{"mcpServers": map[string]any{"p": map[string]any{"command": "sh"}}}},
	})
	a := strings.Join(s.Added(), "\n")
	for _, want := range []string{`"evil" (global) runs /tmp/x -y`, `"p" (project /w) runs sh`} {
		if !strings.Contains(a, want) {
			t.Errorf("Added() = %q lacks %q", a, want)
		}
	}
	if strings.Contains(a, "old") || strings.Contains(a, "url") {
		t.Errorf("Added() = %q reports an unchanged or command-less entry", a)
	}
}

// TestRecordsKeepTheLock: reading the registry never removes the lock file
// that serialises it (a removed lock lets two launches hold "the" lock on
// different files).
func TestRecordsKeepTheLock(t *testing.T) {
	f := newFixture(t)
	unlock, err := LockRegistry(f.home)
	testenv.Must(t, err)
	defer unlock()
	lock := filepath.Join(registryDir(f.home), ".lock")
	before, err := os.Stat(lock)
	testenv.Must(t, err)
	testenv.Must(t, os.WriteFile(filepath.Join(registryDir(f.home), "999999.json"), []byte("not json"), 0o600))
	records(f.home)
	after, err := os.Stat(lock)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("the registry lock was removed or replaced: %v", err)
	}
	if _, err := os.Stat(filepath.Join(registryDir(f.home), "999999.json")); !os.IsNotExist(err) {
		t.Errorf("a malformed record was kept: %v", err)
	}
}

// TestLaunchRecordsItsMountPoints: with no record in the home and nothing to
// make, a launch still records, while it lives, the mount points its jail
// holds in the trees it writes (the next launch checks its own against
// them), and leaves no record after it; once another launch has a record,
// the next one registers (its plan may bind that one's placeholders).
func TestLaunchRecordsItsMountPoints(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.WriteFile(f.ws+"/.claude/settings.local.json", []byte("{}"), 0o644))
	unlock, err := LockRegistry(f.home)
	testenv.Must(t, err)
	testenv.Must(t, Register(f.home))
	unlock()
	p, _ := agent.Lookup("claude")
	_, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws})
	testenv.Must(t, err)
	if len(pr.Placeholders) != 0 {
		t.Fatalf("the fixture needs placeholders %v", pr.Placeholders)
	}
	s, err := Prepare(f.home, "", pr)
	testenv.Must(t, err)
	recs, _ := filepath.Glob(filepath.Join(registryDir(f.home), "*.json"))
	if len(recs) != 1 {
		t.Fatalf("records while the launch lives: %v, want its own", recs)
	}
	b, err := os.ReadFile(recs[0])
	testenv.Must(t, err)
	var r record
	testenv.Must(t, json.Unmarshal(b, &r))
	if !slices.Contains(r.Writable, f.ws) || !slices.ContainsFunc(r.Pinned, func(p pin) bool { return p.Path == f.ws+"/.git/config" }) {
		t.Errorf("the record holds writable %v and pins %v, want the workspace and its .git/config", r.Writable, r.Pinned)
	}
	s.Finish()
	if recs, _ := filepath.Glob(filepath.Join(registryDir(f.home), "*.json")); len(recs) != 0 {
		t.Errorf("records outlived the launch: %v", recs)
	}
	// Another launch's record (here a dead one's): registering is then due.
	c := exec.Command("true")
	testenv.Must(t, c.Run())
	dead := strconv.Itoa(c.Process.Pid)
	other := filepath.Join(registryDir(f.home), dead+".json")
	testenv.Must(t, os.WriteFile(other, []byte(`{"pid":`+dead+`,"start":"1"}`), 0o600))
	unlock, err = LockRegistry(f.home)
	testenv.Must(t, err)
	testenv.Must(t, Register(f.home))
	unlock()
	own := filepath.Join(registryDir(f.home), strconv.Itoa(os.Getpid())+".json")
	if _, err := os.Stat(own); err != nil {
		t.Errorf("with another record present, the launch did not register: %v", err)
	}
	s, err = Prepare(f.home, "", pr)
	testenv.Must(t, err)
	s.Finish()
	for _, r := range []string{own, other} {
		if _, err := os.Stat(r); !os.IsNotExist(err) {
			t.Errorf("%s outlived the session: %v", r, err)
		}
	}
}

// A placeholder with content (commondir's ".") is made with it, and removed
// after the session only while it still holds it.
func TestPlaceholderWithData(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.Remove(f.ws+"/.git/commondir"))
	p, _ := agent.Lookup("codex")
	_, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws})
	testenv.Must(t, err)
	s, err := Prepare(f.home, "", pr)
	testenv.Must(t, err)
	if b, err := os.ReadFile(f.ws + "/.git/commondir"); err != nil || string(b) != ".\n" {
		t.Fatalf("commondir placeholder %q %v", b, err)
	}
	s.Finish()
	if _, err := os.Lstat(f.ws + "/.git/commondir"); err == nil {
		t.Error("the commondir placeholder outlived the session")
	}
	s, err = Prepare(f.home, "", pr)
	testenv.Must(t, err)
	testenv.Must(t, os.WriteFile(f.ws+"/.git/commondir", []byte("../elsewhere\n"), 0o600))
	s.Finish()
	if b, _ := os.ReadFile(f.ws + "/.git/commondir"); string(b) != "../elsewhere\n" {
		t.Errorf("a changed placeholder was removed or rewritten: %q", b)
	}
}
