package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox/workspace"
)

// TestTampered: each protected path that names another inode after the
// session, or is gone, is listed; the others are not.
func TestTampered(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	home, ws := base+"/home", base+"/ws"
	testenv.Mkdirs(t, home, ws+"/.git/hooks", ws+"/.claude")
	for _, p := range []string{ws + "/.git/config", ws + "/.claude/settings.json"} {
		testenv.WriteFile(t, p, "{}")
	}
	pr := &Prep{
		Placeholders: []Placeholder{{Path: ws + "/.git/config.worktree"}},
		Protected: []string{ws + "/.git", ws + "/.git/config", ws + "/.git/hooks", ws + "/.claude/settings.json",
			ws + "/.git/config.worktree"},
	}
	s, err := Prepare(home, "", pr)
	testenv.Must(t, err)
	defer s.Finish()
	if got := s.Tampered(); len(got) != 0 {
		t.Fatalf("nothing changed, yet Tampered() = %v", got)
	}
	// Written in place: the same inode. Replaced, removed: not.
	testenv.Must(t, os.WriteFile(ws+"/.claude/settings.json", []byte(`{"x":1}`), 0o644))
	testenv.Must(t, os.Rename(ws+"/.git/config", ws+"/moved"))
	testenv.WriteFile(t, ws+"/.git/config", "[core]\n")
	testenv.Must(t, os.Remove(ws+"/.git/hooks"))
	testenv.Must(t, os.Remove(ws+"/.git/config.worktree"))
	got := strings.Join(s.Tampered(), "\n")
	want := strings.Join([]string{ws + "/.git/config", ws + "/.git/hooks", ws + "/.git/config.worktree"}, "\n")
	if got != want {
		t.Errorf("Tampered() =\n%s\nwant\n%s", got, want)
	}
}

// TestSourcedFilesWarned: after the session, each file that a host tool
// reads on its own (direnv's .envrc and its .envrc.local, npm's .npmrc,
// VS Code's tasks) and that the session created or changed so that it
// runs something gets a warning naming it, in the workspace and in a
// nested repository; one left alone does not, nor an inert one (an
// .env.example of URLs, an empty settings.json).
func TestSourcedFilesWarned(t *testing.T) {
	f := newFixture(t)
	nested := f.ws + "/lib/dep"
	testenv.Must(t, os.MkdirAll(nested+"/.git", 0o755))
	testenv.Must(t, os.WriteFile(f.ws+"/.envrc", []byte("source_env_if_exists .envrc.local\n"), 0o644))
	testenv.Must(t, os.WriteFile(f.ws+"/.npmrc", []byte("fund=false\n"), 0o644))
	s := &Session{}
	repos, agentDirs := workspace.Find(f.ws)
	s.WatchRepos(f.ws, repos, agentDirs)
	testenv.Must(t, os.WriteFile(f.ws+"/.envrc.local", []byte("evil\n"), 0o644))
	testenv.Must(t, os.WriteFile(f.ws+"/.npmrc", []byte("node-options=--require /tmp/evil.js\n"), 0o644))
	testenv.Must(t, os.MkdirAll(nested+"/.vscode", 0o755))
	testenv.Must(t, os.WriteFile(nested+"/.vscode/tasks.json", []byte(`{"tasks":[{"label":"t","command":"evil","runOptions":{"runOn":"folderOpen"}}]}`), 0o644))
	testenv.Must(t, os.WriteFile(nested+"/.vscode/settings.json", []byte("{}"), 0o644))
	testenv.Must(t, os.WriteFile(f.ws+"/.env.example", []byte("API_URL=x\n"), 0o644))
	got := strings.Join(s.Added(), "\n")
	for _, quiet := range []string{nested + "/.vscode/settings.json", f.ws + "/.env.example"} {
		if strings.Contains(got, quiet) {
			t.Errorf("a warning for the inert %s:\n%s", quiet, got)
		}
	}
	for _, want := range []string{f.ws + "/.envrc.local: direnv", f.ws + "/.npmrc: npm and pnpm run these at every command here: node-options=--require /tmp/evil.js", nested + "/.vscode/tasks.json: VS Code runs these when the folder opens: task \"t\""} {
		if !strings.Contains(got, want) {
			t.Errorf("no warning for %s in:\n%s", want, got)
		}
	}
	if strings.Contains(got, f.ws+"/.envrc:") {
		t.Errorf("a warning for the untouched .envrc:\n%s", got)
	}
}

// TestAgentConfigInSubdirectoriesWarned: after the session, each agent's
// project config file created or changed in a subdirectory of the
// workspace (where that agent, started there, would load it) gets a
// warning: a new .claude/settings.json in a directory that held none, a
// changed opencode.json and a new hook file in .github/hooks where some
// config was already there; an untouched one gets none.
func TestAgentConfigInSubdirectoriesWarned(t *testing.T) {
	f := newFixture(t)
	sub, old := f.ws+"/packages/web", f.ws+"/packages/api"
	testenv.WriteFile(t, old+"/opencode.json", "{}\n")
	testenv.WriteFile(t, old+"/.github/hooks/ok.json", "{}\n")
	testenv.WriteFile(t, old+"/.claude/settings.json", "{}\n")
	testenv.Mkdirs(t, sub)
	s := &Session{}
	repos, agentDirs := workspace.Find(f.ws)
	s.WatchRepos(f.ws, repos, agentDirs)
	testenv.WriteFile(t, sub+"/.claude/settings.json", `{"hooks":{}}`)
	testenv.WriteFile(t, old+"/opencode.json", `{"plugin":["evil"]}`)
	testenv.WriteFile(t, old+"/.github/hooks/evil.json", "{}\n")
	got := strings.Join(s.Added(), "\n")
	for _, want := range []string{sub + "/.claude/settings.json:", old + "/opencode.json:", old + "/.github/hooks/evil.json:"} {
		if !strings.Contains(got, want) {
			t.Errorf("no warning for %s in:\n%s", want, got)
		}
	}
	for _, quiet := range []string{old + "/.claude/settings.json:", old + "/.github/hooks/ok.json:"} {
		if strings.Contains(got, quiet) {
			t.Errorf("a warning for the untouched %s in:\n%s", quiet, got)
		}
	}
}
