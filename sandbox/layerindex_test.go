package sandbox

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/paths"
)

// TestLayerIndexIsTheScan: the index answers as a scan of every layer
// does (the deepest layer that holds the path, the later one of two at the
// same destination), on random trees of binds and tmpfs.
func TestLayerIndexIsTheScan(t *testing.T) {
	scan := func(ls []layer, p string) string {
		best := -1
		for i, l := range ls {
			if l.dst != p && paths.Within(p, l.dst) && (best < 0 || len(l.dst) >= len(ls[best].dst)) {
				best = i
			}
		}
		if best < 0 || ls[best].src == "" {
			return ""
		}
		if ls[best].dst == "/" {
			return p
		}
		return ls[best].src + p[len(ls[best].dst):]
	}
	r := rand.New(rand.NewSource(1))
	names := []string{"a", "b", "c", ".git", "hooks"}
	path := func() string {
		var b strings.Builder
		for n := 1 + r.Intn(4); n > 0; n-- {
			b.WriteString("/" + names[r.Intn(len(names))])
		}
		return b.String()
	}
	for round := 0; round < 200; round++ {
		ix := &layerIndex{ls: []layer{{"/", "/"}}, dst: map[string]int{}}
		for n := r.Intn(12); n > 0; n-- {
			l := layer{dst: path()}
			if r.Intn(3) > 0 {
				l.src = "/host" + path()
			}
			ix.ls = append(ix.ls, l)
		}
		for i, l := range ix.ls {
			ix.dst[l.dst] = i
		}
		for q := 0; q < 50; q++ {
			p := path()
			if got, want := ix.hostPath(p), scan(ix.ls, p); got != want {
				t.Fatalf("layers %v, %s: index %q, scan %q", ix.ls, p, got, want)
			}
		}
		if got := ix.hostPath("/"); got != scan(ix.ls, "/") {
			t.Fatalf("/: %q", got)
		}
	}
}
