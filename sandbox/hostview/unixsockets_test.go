package hostview

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestUnixSocketPaths: a socket this test binds is listed by its path; an
// abstract one is not.
func TestUnixSocketPaths(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := net.Listen("unix", "@cco-hostview-test-"+filepath.Base(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got, err := UnixSocketPaths()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, p) {
		t.Errorf("UnixSocketPaths lacks %s (%d listed)", p, len(got))
	}
	for _, s := range got {
		if !filepath.IsAbs(s) {
			t.Errorf("a relative or abstract name listed: %q", s)
		}
	}

}

func BenchmarkUnixSocketPaths(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < 2000; i++ {
		l, err := net.Listen("unix", filepath.Join(dir, "s"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676))))
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
	}
	b.Run("netlink", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := UnixSocketPaths(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline-procfs", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := os.ReadFile("/proc/net/unix"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzClean: clean says a name needs no cleaning exactly when
// filepath.Clean leaves it as it is.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"/", "/a", "/a/", "//a", "/a/./b", "/a/../b", "/a/.b", "/a/..b", "/.", "/..", "/a/b."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) == 0 || s[0] != '/' {
			return
		}
		if got, want := clean([]byte(s)), filepath.Clean(s) == s; got != want {
			t.Errorf("clean(%q) = %v, filepath.Clean gives %q", s, got, filepath.Clean(s))
		}
	})
}
