package toolchains

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkScan times the credential walk over the shipped trees as
// BenchmarkLaunchFlat's toolchains fixture holds them (shipped), and over a
// tree of Budget entries
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
	// Every tree of the shipped list, with a Maven, a Node and a venv in
	// them: BenchmarkLaunchFlat's toolchains fixture.
	home := b.TempDir()
	var shipped []string
	for _, d := range Default {
		p := filepath.Join(home, d[2:])
		shipped = append(shipped, p)
		if d == "~/.tool-versions" {
			os.WriteFile(p, nil, 0o644)
			continue
		}
		os.MkdirAll(p, 0o755)
	}
	for _, f := range []string{".sdkman/candidates/maven/3.9.9/conf/settings.xml", ".sdkman/candidates/maven/3.9.9/lib/maven-core.jar",
		".nvm/versions/node/v22.11.0/lib/node_modules/npm/npmrc", ".nvm/versions/node/v22.11.0/lib/node_modules/npm/package.json",
		".nvm/versions/node/v22.11.0/bin/node", ".local/share/pipx/venvs/black/pip.conf", ".local/share/pipx/venvs/black/bin/black"} {
		os.MkdirAll(filepath.Dir(filepath.Join(home, f)), 0o755)
		os.WriteFile(filepath.Join(home, f), nil, 0o644)
	}
	b.Run("shipped", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if got := Scan(shipped, Budget); len(got.Found) != 3 {
				b.Fatalf("found %+v", got.Found)
			}
		}
	})
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
