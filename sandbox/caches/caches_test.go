package caches

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTargets: each place's link, resolved from where it sits, names its
// directory in the jail's ~/.cache, and no two places share one.
func TestTargets(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Places {
		got := filepath.Clean(filepath.Join("/h", filepath.Dir(p.Jail), p.Target()))
		if want := filepath.Join("/h", Home, p.Name); got != want {
			t.Errorf("%s -> %s resolves to %s, want %s", p.Jail, p.Target(), got, want)
		}
		if seen[p.Name] || !strings.HasPrefix(p.Name, "cco-") {
			t.Errorf("%s: directory %q is taken, or not cco's own", p.Jail, p.Name)
		}
		seen[p.Name] = true
	}
}

func TestCheck(t *testing.T) {
	for _, m := range []string{"", Persist, Session} {
		if err := Check(m); err != nil {
			t.Errorf("Check(%q) = %v", m, err)
		}
	}
	if err := Check("forever"); err == nil || !strings.Contains(err.Error(), `"forever"`) {
		t.Errorf("Check(forever) = %v", err)
	}
}
