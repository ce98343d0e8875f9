package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox/saferead"
)

// plant puts a FIFO, or a link to /dev/zero, at p.
func plant(t *testing.T, kind, p string) {
	t.Helper()
	os.Remove(p)
	if kind == "fifo" {
		testenv.Must(t, syscall.Mkfifo(p, 0o600))
	} else {
		testenv.Must(t, os.Symlink("/dev/zero", p))
	}
}

// TestPlantedStateFiles: a FIFO or a link to /dev/zero where the shadow
// reads a home file (the state file it carries over, the state file it
// watches, the git identity, a registry record) never hangs or floods a
// launch or a session's end: the carry-over is refused with the fix and
// writes nothing, the watched file is reported, the rest is passed over.
func TestPlantedStateFiles(t *testing.T) {
	p, _ := agent.Lookup("claude")
	for _, kind := range []string{"fifo", "zero"} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t)
			plant(t, kind, f.home+"/.claude.json")
			_, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws})
			testenv.Must(t, err)
			testenv.Within5s(t, "Prepare with a planted ~/.claude.json", func() { _, err = Prepare(f.home, "", pr) })
			if err == nil || !strings.Contains(err.Error(), f.home+"/.claude.json") || !strings.Contains(err.Error(), "fix:") {
				t.Errorf("Prepare: %v; want a refusal naming the file and the fix", err)
			}
			if _, err := os.Lstat(f.home + "/.claude/.claude.json"); !os.IsNotExist(err) {
				t.Errorf("the refused carry-over wrote its target: %v", err)
			}

			// The watched state file, and the git identity and a record.
			os.Remove(f.home + "/.claude.json")
			testenv.Must(t, os.WriteFile(f.home+"/.claude/.claude.json", []byte("{}"), 0o600))
			plant(t, kind, f.home+"/.gitconfig")
			testenv.Must(t, os.MkdirAll(registryDir(f.home), 0o700))
			plant(t, kind, filepath.Join(registryDir(f.home), "1.json"))
			var s *Session
			testenv.Within5s(t, "Prepare with planted home files", func() { s, err = Prepare(f.home, "", pr) })
			testenv.Must(t, err)
			defer s.Finish()
			var g []byte
			testenv.Within5s(t, "Gitconfig", func() { g = Gitconfig(f.home, nil) })
			if strings.Contains(string(g), "[user]") {
				t.Errorf("an identity from a planted ~/.gitconfig:\n%s", g)
			}
			plant(t, kind, f.home+"/.claude/.claude.json")
			var added []string
			testenv.Within5s(t, "Added", func() { added = s.Added() })
			if len(added) != 1 || !strings.Contains(added[0], f.home+"/.claude/.claude.json: cannot be read") {
				t.Errorf("Added() = %q; want the planted state file reported", added)
			}
		})
	}
}

// The identity of a ~/.gitconfig that a dotfile manager links is kept.
func TestGitconfigLinkedIdentity(t *testing.T) {
	f := newFixture(t)
	real := filepath.Join(filepath.Dir(f.home), "dotfiles-gitconfig")
	testenv.Must(t, os.Rename(f.home+"/.gitconfig", real))
	testenv.Must(t, os.Symlink(real, f.home+"/.gitconfig"))
	if g := string(Gitconfig(f.home, nil)); !strings.Contains(g, `name = "Ada L"`) {
		t.Errorf("the linked identity was lost:\n%s", g)
	}
}

// An oversized state file is not carried over: the launch says so.
func TestCarryOverCap(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.WriteFile(f.home+"/.claude.json", make([]byte, saferead.MaxStateFile+1), 0o600))
	err := carryOver(trees{}, f.home, f.home+"/.claude.json", f.home+"/.claude/.claude.json")
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(saferead.MaxStateFile)) {
		t.Errorf("carryOver of an oversized file: %v", err)
	}
	if _, err := os.Lstat(f.home + "/.claude/.claude.json"); !os.IsNotExist(err) {
		t.Errorf("wrote its target: %v", err)
	}
}
