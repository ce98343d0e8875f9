package provision

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// sourceStep installs a large host file the way the vendor and shadow steps
// do: streamed from SourcePath.
func sourceStep(src string) *File {
	f := toolStep()
	f.Content, f.SourcePath = nil, src
	return f
}

func TestFileSourceNoRehash(t *testing.T) {
	r := newRoot(t)
	src := filepath.Join(t.TempDir(), "shadow")
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	writeHost(t, src, big, 0o755)
	install(t, r, sourceStep(src))
	host := r.HostPath(toolPath)
	if !bytes.Equal(readHost(t, host), big) {
		t.Fatal("the installed bytes differ from the source")
	}
	e := loadReceipt(t, r).Paths[toolPath]
	if e.Source == nil || e.Source.Path != src || e.Source.Size != int64(len(big)) {
		t.Fatalf("receipt source stamp = %+v", e.Source)
	}

	w := watchAccess(t, src, host)
	wantStatuses(t, execute(t, r, nil, sourceStep(src)), StatusOK)
	if ev := w.events(t); len(ev) != 0 {
		t.Fatalf("a no-op run opened or read files: %v", ev)
	}
	// The watch sees what the engine does when it has to look.
	when := time.Now().Add(-time.Hour)
	os.Chtimes(host, when, when)
	wantStatuses(t, execute(t, r, nil, sourceStep(src)), StatusOK)
	if ev := strings.Join(w.events(t), ","); !strings.Contains(ev, "tool: read") || strings.Contains(ev, "shadow") {
		t.Fatalf("after a touch of the target: events %q, want the target re-hashed and the source not", ev)
	}
	// A new source (a new stamp) is read and installed.
	next := append(bytes.Clone(big), "more"...)
	writeHost(t, src, next, 0o755)
	wantStatuses(t, execute(t, r, nil, sourceStep(src)), StatusChanged)
	if !bytes.Equal(readHost(t, host), next) {
		t.Fatal("the new source was not installed")
	}
	if ev := strings.Join(w.events(t), ","); !strings.Contains(ev, "shadow: read") {
		t.Fatalf("events %q, want the new source read", ev)
	}
	wantStatuses(t, execute(t, r, nil, sourceStep(src)), StatusOK)
}

func TestFileSourceMissing(t *testing.T) {
	r := newRoot(t)
	src := filepath.Join(t.TempDir(), "nowhere")
	rep := execute(t, r, nil, sourceStep(src))
	wantStatuses(t, rep, StatusFailed)
	if !strings.Contains(rep.Steps[0].Detail, src) {
		t.Fatalf("detail %q does not name the source", rep.Steps[0].Detail)
	}
	if rep.ExitCode() != ExitFailed {
		t.Fatalf("exit = %d", rep.ExitCode())
	}
}

// The source is streamed: installing a 64 MiB file must not hold it in
// memory (a vendor binary is hundreds of megabytes).
func TestFileSourceStreams(t *testing.T) {
	const size = 64 << 20
	src := filepath.Join(t.TempDir(), "big")
	fh, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	fh.Truncate(size) // sparse: cheap to make
	fh.Close()
	r := newRoot(t)
	run := newRun(t, r)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep := Execute(run, []Step{sourceStep(src)})
	runtime.ReadMemStats(&after)
	wantStatuses(t, rep, StatusChanged)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/8 {
		t.Fatalf("installing a %d-byte file allocated %d bytes: the source is not streamed", size, alloc)
	}
	if fi, err := os.Stat(r.HostPath(toolPath)); err != nil || fi.Size() != size {
		t.Fatalf("installed: %v %v", fi, err)
	}
}

// A forced run whose source cannot be read fails without having moved the
// edited file away.
func TestFileForceWithoutSourceKeepsTheEdit(t *testing.T) {
	r := newRoot(t)
	src := filepath.Join(t.TempDir(), "shadow")
	writeHost(t, src, toolV1, 0o755)
	install(t, r, sourceStep(src))
	host := r.HostPath(toolPath)
	writeHost(t, host, []byte("edited\n"), 0o755)
	os.Remove(src)
	rep := execute(t, r, force, sourceStep(src))
	wantStatuses(t, rep, StatusFailed)
	if !strings.Contains(rep.Steps[0].Detail, src) {
		t.Fatalf("detail %q does not name the source", rep.Steps[0].Detail)
	}
	if got, err := os.ReadFile(host); err != nil || string(got) != "edited\n" {
		t.Fatalf("the edited file is gone or changed: %q %v", got, err)
	}
}
