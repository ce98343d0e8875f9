package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/internal/testenv"
)

func TestWorkspaceRefusals(t *testing.T) {
	f := newFixture(t)
	p, _ := agent.Lookup("claude")
	testenv.Must(t, os.MkdirAll(f.home+"/proj", 0o700))
	testenv.Must(t, os.MkdirAll(f.home+"/.ssh/keys", 0o700))
	testenv.Must(t, os.MkdirAll(f.home+"/.codex/x", 0o700))
	testenv.Must(t, os.Symlink(f.home, filepath.Dir(f.home)+"/homelink"))
	for _, tc := range []struct {
		cwd  string
		cfg  Config
		want string
	}{
		{cwd: f.home + "/.ssh/keys", want: "protected tree " + f.home + "/.ssh"},
		{cwd: f.home + "/.claude", want: "protected tree " + f.home + "/.claude"},
		{cwd: f.home + "/.codex/x", want: "protected tree " + f.home + "/.codex"},
		{cwd: "/etc", want: "protected tree /etc"},
		{cwd: "/usr/lib", want: "protected tree /usr"},
		{cwd: "/srv", want: "the top of a tree shared between projects"},
		{cwd: "/opt", want: "the top of a tree shared between projects"},
		{cwd: "/var/tmp", want: "a tree shared with other programs"},
		{cwd: "/dev/shm", want: "refusing the workspace /dev/shm"},
		{cwd: "/run", want: "a tree shared with other programs"},
		{cwd: os.TempDir(), want: "a tree shared with other programs"},
		{cwd: f.ws, cfg: Config{AllowWrite: []string{"/var/tmp/x"}}, want: "refusing the allow_write entry /var/tmp/x"},
		{cwd: f.ws, cfg: Config{WorkspaceRoot: f.home + "/proj"}, want: "is outside workspace_root"},
		{cwd: f.ws, cfg: Config{WorkspaceRoot: "/nonexistent-ws"}, want: "correct workspace_root"},
		{cwd: f.ws, cfg: Config{AllowWrite: []string{filepath.Dir(f.home)}}, want: "refusing the allow_write entry"},
		{cwd: f.ws, cfg: Config{AllowWrite: []string{"/"}}, want: "refusing the allow_write entry /: it would make the whole system writable"},
		{cwd: f.ws, cfg: Config{AllowWrite: []string{f.home}}, want: "refusing the allow_write entry " + f.home + ": it is the home"},
		{cwd: f.ws, cfg: Config{AllowWrite: []string{"/etc/cco"}}, want: "remove /etc/cco from allow_write"},
	} {
		_, _, err := Plan(&Launch{Profile: p, Config: &tc.cfg, Home: f.home, Cwd: tc.cwd})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fix") {
			t.Errorf("cwd %s cfg %+v: error %v, want %q with a fix", tc.cwd, tc.cfg, err, tc.want)
		}
	}
	// A subdirectory of workspace_root is fine, and the root is the workspace.
	testenv.Must(t, os.MkdirAll(f.ws+"/sub", 0o700))
	s, _, err := Plan(&Launch{Profile: p, Config: &Config{WorkspaceRoot: f.ws}, Home: f.home, Cwd: f.ws + "/sub"})
	if err != nil || s.Workspace != f.ws || s.Chdir != f.ws+"/sub" {
		t.Fatalf("workspace_root: %v %+v", err, s)
	}
}

// TestNoWorkspace: in the home, or anywhere that holds it, the agent
// starts with no workspace: nothing of the home bound read-write but the
// login state, an empty private directory as its cwd, and one line that
// says so.
func TestNoWorkspace(t *testing.T) {
	f := newFixture(t)
	p, _ := agent.Lookup("claude")
	testenv.Must(t, os.MkdirAll(f.home+"/proj", 0o700))
	testenv.Must(t, os.Symlink(f.home, filepath.Dir(f.home)+"/homelink"))
	for _, tc := range []struct {
		cwd string
		cfg Config
	}{
		{cwd: "/"}, {cwd: f.home}, {cwd: filepath.Dir(f.home)}, {cwd: filepath.Dir(f.home) + "/homelink"},
		{cwd: "/var/lib"}, {cwd: f.home + "/proj", cfg: Config{WorkspaceRoot: f.home}},
	} {
		s, pr, err := Plan(&Launch{Profile: p, Config: &tc.cfg, Home: f.home, Cwd: tc.cwd})
		if err != nil {
			t.Errorf("cwd %s: %v, want a launch with no workspace", tc.cwd, err)
			continue
		}
		if s.Workspace != "" || s.Chdir != NoWorkspaceDir || s.NoWorkspace != NoWorkspaceDir {
			t.Errorf("cwd %s: workspace %q chdir %q, want none and %s", tc.cwd, s.Workspace, s.Chdir, NoWorkspaceDir)
		}
		if len(pr.Notes) != 1 || !strings.Contains(pr.Notes[0], "starts with no workspace") {
			t.Errorf("cwd %s: notes %q, want one line saying there is no workspace", tc.cwd, pr.Notes)
		}
		s.eachBind(func(b *Bind, rw bool) {
			if rw && !paths.Within(b.Dst, f.home+"/.claude") && b.Dst != f.home+"/.cache" {
				t.Errorf("cwd %s: %s is bound read-write", tc.cwd, b.Dst)
			}
		})
		if len(s.Trees) != 0 || len(pr.Placeholders) != 0 {
			t.Errorf("cwd %s: trees %v placeholders %v, want none with no workspace", tc.cwd, s.Trees, pr.Placeholders)
		}
	}
}

func TestPrivateDirs(t *testing.T) {
	base := []string{"/tmp", "/run"}
	for _, d := range []string{"/var/tmp", "/var/run"} {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			base = append(base, d)
		}
	}
	for xdg, extra := range map[string][]string{
		"/var/xdg/1000":  {"/var/xdg/1000"},
		"/run/user/1000": nil, // covered by /run's tmpfs
		"/tmp":           nil,
		"/":              nil,
		"relative":       nil,
	} {
		got := privateDirs([]string{"XDG_RUNTIME_DIR=" + xdg})
		want := append(slices.Clone(base), extra...)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("XDG_RUNTIME_DIR=%s: privateDirs = %q, want %q", xdg, got, want)
		}
	}
}

func TestAllowedEnv(t *testing.T) {
	got := allowedEnv(hostEnv, []string{"KEEP_ME", "PATH", "MISSING"})
	want := "TERM=xterm-256color LANG=C.UTF-8 LC_ALL=C TZ=UTC COLORTERM=truecolor KEEP_ME=1"
	if strings.Join(got, " ") != want {
		t.Errorf("allowedEnv = %q, want %q", got, want)
	}
}

// TestWorkspaceOverHomeTrees: a workspace or an allow_write entry that is,
// holds or lies in a toolchain tree the jail binds read-only, ~/.cache or
// a dependency cache's place is refused, naming the tree: bound read-write
// after them, it would make the toolchain writable (~/.nvm), or hand the
// session the host's own module cache (~/go/pkg/mod). A project below
// ~/go is a workspace.
func TestWorkspaceOverHomeTrees(t *testing.T) {
	f := newFixture(t)
	p, _ := agent.Lookup("claude")
	for _, d := range []string{".nvm/versions/node/v20/bin", "go/src/proj", "go/bin", ".npm/_cacache", ".cache/proj", "work"} {
		testenv.Must(t, os.MkdirAll(filepath.Join(f.home, d), 0o755))
	}
	for _, tc := range []struct {
		cwd, write, tree string
	}{
		{cwd: ".nvm", tree: ".nvm"},
		{cwd: ".nvm/versions/node/v20/bin", tree: ".nvm"},
		{cwd: "go", tree: "go/bin"},
		{cwd: ".npm/_cacache", tree: ".npm"},
		{cwd: ".cache/proj", tree: ".cache"},
		{cwd: "work", write: ".nvm/versions", tree: ".nvm"},
		{cwd: "go/src/proj"},
	} {
		cfg := &Config{}
		if tc.write != "" {
			cfg.AllowWrite = []string{filepath.Join(f.home, tc.write)}
		}
		_, _, err := Plan(&Launch{Profile: p, Config: cfg, Home: f.home, User: "ada", Cwd: filepath.Join(f.home, tc.cwd), Session: "s"})
		switch {
		case tc.tree == "" && err != nil:
			t.Errorf("cwd ~/%s: %v, want a workspace", tc.cwd, err)
		case tc.tree != "" && (err == nil || !strings.Contains(err.Error(), filepath.Join(f.home, tc.tree)) || !strings.Contains(err.Error(), "fix:")):
			t.Errorf("cwd ~/%s allow_write %q: %v, want a refusal naming ~/%s and the fix", tc.cwd, tc.write, err, tc.tree)
		}
	}
}
