package trust

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

var copilotKeys = []string{"trusted_folders", "trustedFolders"}

var claudeKeys = []string{"projects.*.hasTrustDialogAccepted", "projects.*.enableAllProjectMcpServers"}

func setup(t *testing.T, rel, content string) (List, string) {
	t.Helper()
	home := t.TempDir()
	p := filepath.Join(home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if content != "" {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return List{Agent: "copilot", Home: home, File: rel, Keys: copilotKeys}, p
}

func decode(t *testing.T, p string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	v, err := parse(b)
	if err != nil {
		t.Fatalf("%s no longer parses: %v\n%s", p, err, b)
	}
	std := v.Clone()
	std.Standardize()
	var m map[string]any
	if err := json.Unmarshal(std.Pack(), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A widened trust list is put back, the login the session refreshed in the
// same file is kept, comments survive, and the line names the key.
func TestRestoreKeepsLogin(t *testing.T) {
	l, p := setup(t, ".copilot/config.json", "// managed\n{\n  \"trustedFolders\": [\"/home/u/proj\"],\n  \"token\": \"old\"\n}\n")
	s := Take([]List{l})
	os.WriteFile(p, []byte("// managed\n{\"trustedFolders\": [\"/\"], \"trusted_folders\": [\"/\"], \"token\": \"refreshed\"}\n"), 0o600)
	lines := s.Restore()
	if len(lines) != 1 || !strings.Contains(lines[0], "trustedFolders") || !strings.Contains(lines[0], "trusted_folders") || !strings.Contains(lines[0], p) {
		t.Fatalf("want one line naming both keys and the file, got %q", lines)
	}
	m := decode(t, p)
	if m["token"] != "refreshed" {
		t.Errorf("the login refresh was lost: %v", m)
	}
	if tf, _ := json.Marshal(m["trustedFolders"]); string(tf) != `["/home/u/proj"]` {
		t.Errorf("trustedFolders = %s, want the launch's", tf)
	}
	if _, ok := m["trusted_folders"]; ok {
		t.Errorf("trusted_folders, absent at launch, is still there: %v", m)
	}
	if b, _ := os.ReadFile(p); !strings.HasPrefix(string(b), "// managed") {
		t.Errorf("the comment was lost:\n%s", b)
	}
	if again := s.Restore(); len(again) != 0 {
		t.Errorf("a second restore still finds changes: %q", again)
	}
}

// An unchanged trust list is neither rewritten nor reported.
func TestRestoreUnchanged(t *testing.T) {
	l, p := setup(t, ".copilot/config.json", `{"trustedFolders":["/a"],"token":"x"}`)
	s := Take([]List{l})
	os.WriteFile(p, []byte(`{"trustedFolders":["/a"],"token":"y"}`), 0o600)
	var before syscall.Stat_t
	syscall.Stat(p, &before)
	if lines := s.Restore(); len(lines) != 0 {
		t.Fatalf("reported %q for a file whose trust did not change", lines)
	}
	var after syscall.Stat_t
	syscall.Stat(p, &after)
	if before.Ino != after.Ino {
		t.Error("the file was rewritten though its trust did not change")
	}
}

// Claude's per-project keys: "/" marked trusted with every project MCP
// server enabled, in a project that did not exist at launch, is removed;
// a project the session changed gets its own values back.
func TestRestoreClaudeProjects(t *testing.T) {
	l, p := setup(t, ".claude/.claude.json", `{"oauthAccount":{"a":1},"projects":{"/home/u/p":{"hasTrustDialogAccepted":true,"history":[1]}}}`)
	l.Agent, l.Keys = "claude", claudeKeys
	s := Take([]List{l})
	os.WriteFile(p, []byte(`{"oauthAccount":{"a":2},"projects":{"/":{"hasTrustDialogAccepted":true,"enableAllProjectMcpServers":true,"history":[]},"/home/u/p":{"hasTrustDialogAccepted":false,"enableAllProjectMcpServers":true,"history":[1,2]}}}`), 0o600)
	lines := s.Restore()
	if len(lines) != 1 || !strings.Contains(lines[0], `projects."/".hasTrustDialogAccepted = true`) {
		t.Fatalf("want one line naming projects.\"/\", got %q", lines)
	}
	m := decode(t, p)
	projects := m["projects"].(map[string]any)
	root := projects["/"].(map[string]any)
	if _, ok := root["hasTrustDialogAccepted"]; ok {
		t.Errorf("/ is still trusted: %v", root)
	}
	if _, ok := root["enableAllProjectMcpServers"]; ok {
		t.Errorf("/ still enables every project MCP server: %v", root)
	}
	proj := projects["/home/u/p"].(map[string]any)
	if proj["hasTrustDialogAccepted"] != true || proj["enableAllProjectMcpServers"] != nil {
		t.Errorf("the project's trust is not the launch's: %v", proj)
	}
	if h, _ := json.Marshal(proj["history"]); string(h) != "[1,2]" {
		t.Errorf("the session's other writes were lost: %s", h)
	}
	if a, _ := json.Marshal(m["oauthAccount"]); string(a) != `{"a":2}` {
		t.Errorf("the login refresh was lost: %s", a)
	}
}

// A key named twice: the agents keep the last, and so is what is put back.
func TestRestoreDuplicateKey(t *testing.T) {
	l, p := setup(t, ".copilot/config.json", `{"trustedFolders":[],"token":"x"}`)
	s := Take([]List{l})
	os.WriteFile(p, []byte(`{"trustedFolders":[],"token":"y","trustedFolders":["/"]}`), 0o600)
	if lines := s.Restore(); len(lines) != 1 {
		t.Fatalf("want one line, got %q", lines)
	}
	b, _ := os.ReadFile(p)
	if strings.Contains(string(b), `"/"`) {
		t.Errorf("the second trustedFolders survived:\n%s", b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["token"] != "y" {
		t.Errorf("the file is not the session's with the trust put back: %v\n%s", err, b)
	}
}

// A file the session replaced by a link, a FIFO, a huge file or text that
// does not parse is put back whole as it was at launch, without following
// the link or waiting on the FIFO; one made where none was is removed.
func TestRestoreReplaced(t *testing.T) {
	const launch = `{"trustedFolders":["/a"],"token":"x"}`
	outside := filepath.Join(t.TempDir(), "evil.json")
	os.WriteFile(outside, []byte(`{"trustedFolders":["/"]}`), 0o644)
	for _, c := range []struct {
		name   string
		plant  func(p string) error
		launch string
	}{
		{"link", func(p string) error { os.Remove(p); return os.Symlink(outside, p) }, launch},
		{"fifo", func(p string) error { os.Remove(p); return syscall.Mkfifo(p, 0o600) }, launch},
		{"huge", func(p string) error {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(MaxFile + 1)
		}, launch},
		{"not json", func(p string) error { return os.WriteFile(p, []byte("trustedFolders = /"), 0o600) }, launch},
		{"empty dir", func(p string) error { os.Remove(p); return os.Mkdir(p, 0o700) }, launch},
		{"new link", func(p string) error { return os.Symlink(outside, p) }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, p := setup(t, ".copilot/config.json", c.launch)
			s := Take([]List{l})
			if err := c.plant(p); err != nil {
				t.Fatal(err)
			}
			lines := s.Restore()
			if len(lines) != 1 || !strings.Contains(lines[0], p) {
				t.Fatalf("want one line naming %s, got %q", p, lines)
			}
			fi, err := os.Lstat(p)
			if c.launch == "" {
				if err == nil {
					t.Fatalf("the planted entry is still there: %v", fi.Mode())
				}
				return
			}
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("not a regular file after the restore: %v %v", fi, err)
			}
			if b, _ := os.ReadFile(p); string(b) != launch {
				t.Errorf("content %q, want the launch's", b)
			}
			if b, _ := os.ReadFile(outside); string(b) != `{"trustedFolders":["/"]}` {
				t.Errorf("the link's target was written: %q", b)
			}
		})
	}
}

// The directory of the file swapped for a link: nothing is written through it.
func TestRestoreDirectoryLink(t *testing.T) {
	l, p := setup(t, ".copilot/config.json", `{"trustedFolders":[]}`)
	s := Take([]List{l})
	elsewhere := t.TempDir()
	os.WriteFile(filepath.Join(elsewhere, "config.json"), []byte(`{"trustedFolders":["/"]}`), 0o600)
	os.Rename(filepath.Dir(p), filepath.Dir(p)+".aside")
	os.Symlink(elsewhere, filepath.Dir(p))
	lines := s.Restore()
	if len(lines) != 1 || !strings.Contains(lines[0], "could not be checked") {
		t.Errorf("want a line saying the file could not be checked, got %q", lines)
	}
	if b, _ := os.ReadFile(filepath.Join(elsewhere, "config.json")); string(b) != `{"trustedFolders":["/"]}` {
		t.Errorf("written through the link: %q", b)
	}
}

// The mode and, as root, the owner of the file are kept.
func TestRestoreKeepsMode(t *testing.T) {
	l, p := setup(t, ".copilot/config.json", `{"trustedFolders":[]}`)
	os.Chmod(p, 0o640)
	if os.Geteuid() == 0 {
		os.Chown(p, 65534, 65534)
	}
	s := Take([]List{l})
	os.WriteFile(p, []byte(`{"trustedFolders":["/"]}`), 0o640)
	s.Restore()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o777 != 0o640 {
		t.Errorf("mode %o, want 640", st.Mode&0o777)
	}
	if os.Geteuid() == 0 && st.Uid != 65534 {
		t.Errorf("owner %d, want 65534", st.Uid)
	}
	if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 1 {
		t.Errorf("a temporary file was left: %v", ents)
	}
}

// The workspace, which the agent's own trust dialog in the jail trusts,
// stays trusted: a list keeps the entry naming it exactly, a project entry
// named by it keeps the session's values; "/" and a folder below the
// workspace are still put back, and the line names only what was.
func TestRestoreKeepsWorkspaceTrust(t *testing.T) {
	const ws = "/srv/ws"
	l, p := setup(t, ".copilot/config.json", `{"trustedFolders":["/a"]}`)
	l.Allow = []string{ws}
	s := Take([]List{l})
	os.WriteFile(p, []byte(`{"trustedFolders":["/a","/srv/ws"]}`), 0o600)
	if lines := s.Restore(); len(lines) != 0 {
		t.Errorf("the workspace's trust was reported: %q", lines)
	}
	os.WriteFile(p, []byte(`{"trustedFolders":["/a","/srv/ws","/","/srv/ws/sub"]}`), 0o600)
	lines := s.Restore()
	if len(lines) != 1 {
		t.Fatalf("want one line, got %q", lines)
	}
	if tf, _ := json.Marshal(decode(t, p)["trustedFolders"]); string(tf) != `["/a","/srv/ws"]` {
		t.Errorf("trustedFolders = %s, want the launch's and the workspace", tf)
	}

	cl, cp := setup(t, ".claude/.claude.json", `{"projects":{}}`)
	cl.Agent, cl.Keys, cl.Allow = "claude", claudeKeys, []string{ws}
	cs := Take([]List{cl})
	os.WriteFile(cp, []byte(`{"projects":{"/srv/ws":{"hasTrustDialogAccepted":true},"/":{"hasTrustDialogAccepted":true}}}`), 0o600)
	lines = cs.Restore()
	if len(lines) != 1 || strings.Contains(lines[0], "srv/ws") || !strings.Contains(lines[0], `projects."/"`) {
		t.Fatalf("want one line naming / alone, got %q", lines)
	}
	projects := decode(t, cp)["projects"].(map[string]any)
	if projects["/srv/ws"].(map[string]any)["hasTrustDialogAccepted"] != true {
		t.Errorf("the workspace's trust was put back: %v", projects)
	}
	if projects["/"].(map[string]any)["hasTrustDialogAccepted"] != nil {
		t.Errorf("LEAK: / stays trusted: %v", projects)
	}
}
