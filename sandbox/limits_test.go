package sandbox

import (
	"strconv"
	"strings"
	"testing"
)

func TestTmpfsSizeKey(t *testing.T) {
	for text, want := range map[string]Size{
		"tmpfs_size = 1073741824": {Bytes: 1 << 30},
		`tmpfs_size = "25%"`:      {Percent: 25},
		"":                        {},
	} {
		c, err := ParseConfig([]byte(text), "sandbox.toml")
		if err != nil || c.TmpfsSize != want {
			t.Errorf("%q: %+v %v, want %+v", text, c, err, want)
		}
	}
	for _, bad := range []string{"tmpfs_size = 0", `tmpfs_size = "lots"`, `tmpfs_size = "150%"`, "tmpfs_size = -1", "max_procs = -3"} {
		if _, err := ParseConfig([]byte(bad), "sandbox.toml"); err == nil || !strings.Contains(err.Error(), "sandbox.toml") {
			t.Errorf("%q: %v, want an error naming the file", bad, err)
		}
	}
	if got := (Size{Percent: 25}).total(4 << 30); got != 1<<30 {
		t.Errorf("25%% of 4 GiB = %d", got)
	}
	if got := (Size{}).total(4 << 30); got != 2<<30 {
		t.Errorf("default of 4 GiB = %d, want half", got)
	}
}

// Every writable tmpfs is sized, and the sizes add up to at most the total.
func TestArgvTmpfsSized(t *testing.T) {
	f := newFixture(t)
	total := int64(1 << 30)
	s, _, c := f.plan(t, "codex", 1000, &Config{TmpfsSize: Size{Bytes: total}}, hostEnv)
	var sum int64
	for p, n := range s.TmpfsSize {
		sum += n
		c.has("--size", itoa(n), "--tmpfs", p)
	}
	if sum > total {
		t.Errorf("tmpfs sizes add up to %d, over %d", sum, total)
	}
	for i, a := range c.argv {
		if a == "--tmpfs" && (i+2 >= len(c.argv) || c.argv[i+2] != "--remount-ro") && (i < 2 || c.argv[i-2] != "--size") && c.argv[i+1] != f.home {
			t.Errorf("writable tmpfs %s has no size", c.argv[i+1])
		}
	}
	if s.TmpfsSize["/tmp"] <= s.TmpfsSize["/run"] || s.TmpfsSize[devShm] == 0 {
		t.Errorf("shares: %v", s.TmpfsSize)
	}
	if s.MaxProcs != DefaultMaxProcs {
		t.Errorf("MaxProcs %d, want %d", s.MaxProcs, DefaultMaxProcs)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
