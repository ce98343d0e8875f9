package toolchains

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkScan times the credential walk over a tree of Budget entries
// (a rustup toolchain's docs: directories of 100 files) against the
// standard library's walk of the same tree reading the same names
// (filepath.WalkDir, baseline-walkdir). The walk's cost within a launch is
// in cmd/shadow's BenchmarkLaunchFlat (toolchains, toolchainsfull).
func BenchmarkScan(b *testing.B) {
	tree := b.TempDir()
	for d := 0; d*100 < Budget; d++ {
		dir := filepath.Join(tree, fmt.Sprintf("share/doc/m%04d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 99; i++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.html", i)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("budget", func(b *testing.B) {
		var n int
		for i := 0; i < b.N; i++ {
			n = Scan([]string{tree}, Budget).Entries
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n)*1000, "ns/entry")
	})
	b.Run("baseline-walkdir", func(b *testing.B) {
		var n int
		for i := 0; i < b.N; i++ {
			n = 0
			filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
				n++
				if _, ok := match([]byte(d.Name())); ok {
					b.Log(p)
				}
				return nil
			})
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n)*1000, "ns/entry")
	})
}
