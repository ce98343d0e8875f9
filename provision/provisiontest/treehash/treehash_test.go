package treehash

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Hash sees every kind of change below the directory; Shape sees all but
// the times and sizes a copy sets anew.
func TestHashAndShape(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a/file")
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte("one"), 0o644)
	os.Symlink("file", filepath.Join(dir, "a/link"))
	if got, want := List(dir), []string{"a", "a/file", "a/link"}; !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
	changes := []struct {
		name  string
		do    func()
		shape bool // whether Shape sees it too
	}{
		{"touch", func() { os.Chtimes(file, time.Unix(1, 0), time.Unix(1, 0)) }, false},
		{"write", func() { os.WriteFile(file, []byte("two"), 0o644) }, true},
		{"chmod", func() { os.Chmod(file, 0o600) }, true},
		{"relink", func() { os.Remove(filepath.Join(dir, "a/link")); os.Symlink("other", filepath.Join(dir, "a/link")) }, true},
		{"create", func() { os.WriteFile(filepath.Join(dir, "new"), nil, 0o644) }, true},
		{"remove", func() { os.Remove(filepath.Join(dir, "new")) }, true},
	}
	for _, c := range changes {
		hash, shape := Hash(t, dir), Shape(t, dir)
		c.do()
		if Hash(t, dir) == hash {
			t.Errorf("%s: Hash did not change", c.name)
		}
		if (Shape(t, dir) != shape) != c.shape {
			t.Errorf("%s: Shape changed = %v, want %v", c.name, Shape(t, dir) != shape, c.shape)
		}
	}
	if _, err := HashDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("HashDir of a missing directory gave no error")
	}
}
