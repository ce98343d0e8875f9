package paths

import "testing"

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/ab", "/a", false},
		{"/a", "/a/b", false},
		{"/x", "/", true},
		{".cargo/bin", ".cargo", true},
		{".cargox", ".cargo", false},
	} {
		if got := Within(c.p, c.dir); got != c.want {
			t.Errorf("Within(%q, %q) = %v, want %v", c.p, c.dir, got, c.want)
		}
	}
}
