package extract

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func statUID(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// FuzzExtractTar feeds the tar layer, where every hostile kind lives,
// arbitrary archives seeded with each of them; nothing may be written
// outside the staging directory. It is the target to run in CI:
//
//	go test -run XXX -fuzz FuzzExtractTar -fuzztime 60s ./vendorfetch/extract/
func FuzzExtractTar(f *testing.F) {
	f.Add(tarOf(f, codexTree...))
	for _, es := range hostile {
		f.Add(tarOf(f, es...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir, parent, done := fuzzStaging(t)
		defer done()
		res, err := ExtractTar(bytes.NewReader(data), dir, 1<<20)
		assertContained(t, parent)
		checkModes(t, res, err)
	})
}

func checkModes(t *testing.T, res *Result, err error) {
	if err != nil {
		return
	}
	for _, m := range res.Members {
		if m.Kind != KindLink && m.Mode&(fs.ModeSetuid|fs.ModeSetgid|0o022) != 0 {
			t.Errorf("%s kept mode %v", m.Name, m.Mode)
		}
	}
}

// FuzzExtract feeds the extractor arbitrary archives, seeded with every
// hostile kind (plain and compressed), and checks that nothing is ever
// written outside the staging directory, whatever the input.
func FuzzExtract(f *testing.F) {
	f.Add(tarOf(f, codexTree...))
	f.Add(gz(f, tarOf(f, codexTree...)))
	f.Add(zst(f, tarOf(f, codexTree...)))
	f.Add(xzOf(f, tarOf(f, codexTree...)))
	for _, es := range hostile {
		plain := tarOf(f, es...)
		f.Add(plain)
		f.Add(gz(f, plain))
		f.Add(zst(f, plain))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir, parent, done := fuzzStaging(t)
		defer done()
		res, err := Extract(bytes.NewReader(data), dir, 1<<20)
		assertContained(t, parent)
		checkModes(t, res, err)
	})
}

// fuzzStaging is staging without t.TempDir, whose per-test bookkeeping
// grows with every input and stalls a long fuzzing run.
func fuzzStaging(t *testing.T) (*os.File, string, func()) {
	parent, err := os.MkdirTemp("", "cco-fuzz-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(parent, "stage"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(filepath.Join(parent, "stage"))
	if err != nil {
		t.Fatal(err)
	}
	return d, parent, func() { d.Close(); os.RemoveAll(parent) }
}
