package provision

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// BenchmarkNoopRerun measures a whole no-op run (load the receipt, Check
// every step, Execute, compare the receipt) on a fully installed root that
// holds one owned file streamed from SourcePath: 1 MB in one sub-benchmark,
// 250 MB in the other. The stamps let a no-op read neither the source nor
// the target, so the two cost about the same; read-B/op (bytes the process
// read, from /proc/self/io) shows that neither reads its file. The -rehash
// sub-benchmarks are the baseline: one full read and hash of the file.
//
//	go test -run '^$' -bench NoopRerun ./provision/
func BenchmarkNoopRerun(b *testing.B) {
	for _, tc := range []struct {
		name string
		size int64
	}{{"1MB", 1 << 20}, {"250MB", 250 << 20}} {
		// Set up once per benchmark run, not per b.Run round: the parent
		// benchmark function runs once.
		r := newRoot(b)
		src := filepath.Join(b.TempDir(), "vendor-binary")
		f, err := os.Create(src)
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Truncate(tc.size); err != nil { // sparse: the source is never read on a no-op
			b.Fatal(err)
		}
		f.Close()
		step := sourceStep(src)
		if rep := Execute(newRun(b, r), []Step{step}); rep.Changed != 1 || rep.ExitCode() != ExitOK {
			b.Fatalf("install: %+v", rep.Steps)
		}
		// Flush the install's writes now, so that the kernel writing 250 MB
		// back in the background is not what the no-op run is timed against.
		syscall.Sync()
		b.Run(tc.name, func(b *testing.B) {
			before := readBytes(b)
			for b.Loop() {
				run, err := NewRun(context.Background(), r)
				if err != nil {
					b.Fatal(err)
				}
				if rep := Execute(run, []Step{step}); rep.Changed != 0 || rep.ExitCode() != ExitOK {
					b.Fatalf("not a no-op: %+v", rep.Steps)
				}
			}
			b.ReportMetric(float64(readBytes(b)-before)/float64(b.N), "read-B/op")
		})
		// The baseline: what each no-op would cost if it had to read the
		// file (as `cco-install status --verify` does on purpose).
		b.Run(tc.name+"-rehash", func(b *testing.B) {
			before := readBytes(b)
			for b.Loop() {
				if _, err := HashFile(r, toolPath); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(readBytes(b)-before)/float64(b.N), "read-B/op")
		})
	}
}

// readBytes is how many bytes this process has read through read(2) and
// friends so far (rchar in /proc/self/io).
func readBytes(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("rchar: ")); ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no rchar in /proc/self/io")
	return 0
}
