package toolchains

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Shapes are the places credential files were found in toolchain trees
// that a list of known places missed, and their twins under every other
// layout: home-relative, each ending in the credential's name.
var Shapes = []string{
	// Maven's global settings in a distribution's conf/.
	".sdkman/candidates/maven/3.9.9/conf/settings.xml",
	".local/share/mise/installs/maven/3.9.9/conf/settings.xml",
	".asdf/installs/maven/3.9.9/conf/settings.xml",
	// npm's builtin config, beside npm itself.
	".nvm/versions/node/v22.11.0/lib/node_modules/npm/npmrc",
	".local/share/fnm/node-versions/v22.11.0/installation/lib/node_modules/npm/npmrc",
	".fnm/node-versions/v22.11.0/installation/lib/node_modules/npm/npmrc",
	".volta/tools/image/node/22.11.0/lib/node_modules/npm/npmrc",
	".local/share/mise/installs/node/22.11.0/lib/node_modules/npm/npmrc",
	".asdf/installs/nodejs/22.11.0/lib/node_modules/npm/npmrc",
	// pip's site config in a venv.
	".local/share/pipx/venvs/black/pip.conf",
	".local/pipx/venvs/black/pip.conf",
	".local/share/uv/tools/ruff/pip.conf",
	".pyenv/versions/3.12.7/envs/work/pip.conf",
	".local/share/mise/installs/python/3.12.7/pip.conf",
	".asdf/installs/python/3.12.7/pip.conf",
	// The known places of before.
	".nvm/versions/node/v22.11.0/etc/npmrc",
	".pyenv/versions/3.12.7/pip.conf",
	// Others by name.
	".sdkman/candidates/maven/3.9.9/conf/settings-security.xml",
	".sdkman/candidates/gradle/8.10/gradle.properties",
	".dotnet/NuGet.Config",
	".dotnet/tools/.store/x/nuget.config",
	".local/share/uv/python/cpython-3.12/credentials.toml",
	".rustup/toolchains/stable/etc/credentials",
}

func TestScanFindsByName(t *testing.T) {
	home := t.TempDir()
	for _, s := range Shapes {
		p := filepath.Join(home, s)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Files that only look like one: not masked.
	for _, s := range []string{".nvm/versions/node/v22.11.0/lib/node_modules/npm/npmrc.md", ".pyenv/pip.conf.d/x", ".volta/settings.xml.bak"} {
		p := filepath.Join(home, s)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, nil, 0o644)
	}
	var trees []string
	for _, d := range Default {
		trees = append(trees, filepath.Join(home, d[2:]))
	}
	got := Scan(trees, Budget)
	var paths []string
	for _, f := range got.Found {
		paths = append(paths, f.Path)
	}
	for _, s := range Shapes {
		if !slices.Contains(paths, filepath.Join(home, s)) {
			t.Errorf("Scan missed ~/%s", s)
		}
	}
	if len(paths) != len(Shapes) || len(got.Unsearched) != 0 {
		t.Errorf("Scan found %d (want %d), left %q unsearched:\n%s", len(paths), len(Shapes), got.Unsearched, strings.Join(paths, "\n"))
	}
}

// TestScanLinksAndUnlistable: a link named as a credential is reported as
// a link; a directory that can be searched but not listed has each name
// looked up in it.
func TestScanLinksAndUnlistable(t *testing.T) {
	tree := t.TempDir()
	os.WriteFile(filepath.Join(tree, "secret.txt"), []byte("s"), 0o600)
	os.Symlink("secret.txt", filepath.Join(tree, "pip.conf"))
	hidden := filepath.Join(tree, "x")
	os.Mkdir(hidden, 0o755)
	os.WriteFile(filepath.Join(hidden, ".npmrc"), []byte("s"), 0o600)
	os.WriteFile(filepath.Join(hidden, "nuget.config"), []byte("s"), 0o600)
	os.Chmod(hidden, 0o311)
	t.Cleanup(func() { os.Chmod(hidden, 0o755) })
	got := Scan([]string{tree}, Budget)
	// (Root lists the directory anyway; lookUp is then tested alone.)
	want := map[string]bool{filepath.Join(tree, "pip.conf"): true, filepath.Join(hidden, ".npmrc"): false, filepath.Join(hidden, "nuget.config"): false}
	if len(got.Found) != len(want) {
		t.Fatalf("Scan = %+v, want %v", got.Found, want)
	}
	for _, f := range got.Found {
		if link, ok := want[f.Path]; !ok || link != f.Link {
			t.Errorf("Scan found %s (link %v), want %v", f.Path, f.Link, want)
		}
	}
	fd, err := unix.Open(tree, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var s Scanned
	s.lookUp(fd, "x", hidden)
	if len(s.Found) != 2 || s.Found[0].Path != filepath.Join(hidden, ".npmrc") || s.Found[0].Link || s.Found[1].Path != filepath.Join(hidden, "nuget.config") {
		t.Errorf("lookUp = %+v", s.Found)
	}
}

// TestScanBudget: the walk stops at its budget and names every directory
// it did not read, shallowest first; what lies above is still found.
func TestScanBudget(t *testing.T) {
	tree := t.TempDir()
	os.WriteFile(filepath.Join(tree, "credentials"), nil, 0o600)
	deep := tree
	for i := 0; i < 5; i++ {
		deep = filepath.Join(deep, fmt.Sprintf("d%d", i))
		os.Mkdir(deep, 0o755)
		for j := 0; j < 20; j++ {
			os.WriteFile(filepath.Join(deep, fmt.Sprintf("f%02d", j)), nil, 0o644)
		}
	}
	os.WriteFile(filepath.Join(deep, ".netrc"), nil, 0o600)
	full := Scan([]string{tree}, Budget)
	if len(full.Found) != 2 || len(full.Unsearched) != 0 || full.Entries != 2+5*21-1+1 {
		t.Fatalf("unbounded: %+v", full)
	}
	// A tree below another is walked once.
	if twice := Scan([]string{tree, filepath.Join(tree, "d0")}, Budget); len(twice.Found) != 2 || twice.Entries != full.Entries {
		t.Errorf("nested trees: %+v", twice)
	}
	got := Scan([]string{tree}, 30)
	if len(got.Found) != 1 || got.Found[0].Name != "credentials" {
		t.Errorf("bounded: found %+v, want only the shallow one", got.Found)
	}
	if len(got.Unsearched) == 0 || got.Entries != 30 {
		t.Fatalf("bounded: read %d entries, unsearched %q", got.Entries, got.Unsearched)
	}
	for i := 1; i < len(got.Unsearched); i++ {
		if strings.Count(got.Unsearched[i], "/") < strings.Count(got.Unsearched[i-1], "/") {
			t.Errorf("unsearched not shallowest first: %q", got.Unsearched)
		}
	}
	if !slices.Contains(got.Unsearched, filepath.Join(tree, "d0", "d1")) {
		t.Errorf("unsearched %q does not name d0/d1, which holds what was not read", got.Unsearched)
	}
}

// TestCredentialNames: names are unique (without regard to case) and each
// stand-in is the empty form of its format.
func TestCredentialNames(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Credentials {
		l := strings.ToLower(c.Name)
		if seen[l] || strings.Contains(c.Name, "/") {
			t.Errorf("credential name %q repeated or not a name", c.Name)
		}
		seen[l] = true
		if StandIn(c.Name) != c.Stand {
			t.Errorf("StandIn(%q) = %q", c.Name, StandIn(c.Name))
		}
	}
	if n, ok := match([]byte("NUGET.CONFIG")); !ok || n != "NuGet.Config" {
		t.Errorf("match(NUGET.CONFIG) = %q, %v", n, ok)
	}
}

// TestScanUnlistableTree: a tree that can be searched but not listed has
// each name looked up in it (as a user; root lists it anyway).
func TestScanUnlistableTree(t *testing.T) {
	tree := filepath.Join(t.TempDir(), "t")
	os.Mkdir(tree, 0o755)
	os.WriteFile(filepath.Join(tree, "pip.conf"), []byte("s"), 0o644)
	os.Chmod(tree, 0o311)
	t.Cleanup(func() { os.Chmod(tree, 0o755) })
	got := Scan([]string{tree}, Budget)
	if len(got.Found) != 1 || got.Found[0].Path != filepath.Join(tree, "pip.conf") {
		t.Errorf("Scan = %+v", got.Found)
	}
}

// TestScanFileTree: a tree that is one file named as a credential is
// found; one of another name is not.
func TestScanFileTree(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".netrc"), []byte("s"), 0o600)
	os.WriteFile(filepath.Join(dir, ".tool-versions"), []byte("s"), 0o644)
	got := Scan([]string{filepath.Join(dir, ".netrc"), filepath.Join(dir, ".tool-versions")}, Budget)
	if len(got.Found) != 1 || got.Found[0].Path != filepath.Join(dir, ".netrc") {
		t.Errorf("Scan = %+v", got.Found)
	}
}
