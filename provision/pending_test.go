package provision

import (
	"os"
	"path/filepath"
	"testing"
)

// A run killed after renaming new bytes into place but before recording them
// leaves the receipt with the old hash and the new one as pending. The next
// run must take those bytes as cco's (no false "edited" conflict), and must
// not trust the old source stamp for them.
func TestPendingBytesAreOursAfterAKill(t *testing.T) {
	r := newRoot(t)
	dir := t.TempDir()
	s1, s2 := filepath.Join(dir, "s1"), filepath.Join(dir, "s2")
	v1, v2 := []byte("version one\n"), []byte("version two, longer\n")
	writeHost(t, s1, v1, 0o755)
	writeHost(t, s2, v2, 0o755)
	step := func(src string) *File {
		return &File{StepID: "x", StepName: "x", Path: "/usr/bin/x", Mode: 0o755, UID: -1, GID: -1, SourcePath: src}
	}
	wantStatuses(t, execute(t, r, nil, step(s1)), StatusChanged)

	// Simulate the kill: v2's hash saved as pending, v2 renamed into place,
	// and nothing recorded after that.
	run := newRun(t, r)
	e := run.Receipt.Paths["/usr/bin/x"]
	e.Pending = sum(v2)
	if err := run.SaveReceipt(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.HostPath("/usr/bin/x.new"), v2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(r.HostPath("/usr/bin/x.new"), r.HostPath("/usr/bin/x")); err != nil {
		t.Fatal(err)
	}

	// With s1 wanted again, the v2 bytes are ours (no conflict) but not s1's:
	// the step must put v1 back, not take the stale s1 stamp as proof.
	wantStatuses(t, execute(t, r, nil, step(s1)), StatusChanged)
	if got := readHost(t, r.HostPath("/usr/bin/x")); string(got) != string(v1) {
		t.Fatalf("content %q, want %q", got, v1)
	}
	wantStatuses(t, execute(t, r, nil, step(s1)), StatusOK)
}

// Pending bytes that are not the ones on disk do not excuse an edit.
func TestPendingDoesNotExcuseAnEdit(t *testing.T) {
	r := newRoot(t)
	step := &File{StepID: "x", StepName: "x", Path: "/etc/x", Mode: 0o644, UID: -1, GID: -1, Content: []byte("ours\n")}
	wantStatuses(t, execute(t, r, nil, step), StatusChanged)
	run := newRun(t, r)
	run.Receipt.Paths["/etc/x"].Pending = sum([]byte("something else\n"))
	run.SaveReceipt()
	if err := os.WriteFile(r.HostPath("/etc/x"), []byte("edited by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantStatuses(t, execute(t, r, nil, step), StatusConflict)
}
