package provision

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// A user who swaps directories and files of the tree being copied for
// symlinks, over and over while root copies, gets nothing from root: no
// byte of the file the links point at ever lands in the copy.
func TestCopyTreeAtRacingSwapper(t *testing.T) {
	base := t.TempDir()
	secret := filepath.Join(base, "secret")
	os.MkdirAll(secret, 0o700)
	os.WriteFile(filepath.Join(secret, "shadow"), []byte("ROOT-ONLY-SECRET"), 0o600)
	src := filepath.Join(base, "home")
	for i := 0; i < 20; i++ {
		d := filepath.Join(src, "d", string(rune('a'+i)))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "shadow"), []byte("user data"), 0o644)
	}
	dstDir, err := os.MkdirTemp("/dev/shm", "cco-race-")
	if err != nil {
		dstDir = t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dstDir) })

	var stop atomic.Bool
	var swaps atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			for i := 0; i < 20; i++ {
				d := filepath.Join(src, "d", string(rune('a'+i)))
				// The directory becomes a link to the secret, and a file
				// becomes a link to the secret file; then both come back.
				if os.Rename(d, d+".real") == nil {
					os.Symlink(secret, d)
					f := filepath.Join(d+".real", "shadow")
					if os.Rename(f, f+".real") == nil {
						os.Symlink(filepath.Join(secret, "shadow"), f)
						os.Remove(f)
						os.Rename(f+".real", f)
					}
					os.Remove(d)
					os.Rename(d+".real", d)
					swaps.Add(1)
				}
			}
		}
	}()
	copies, failures := 0, 0
	for i := 0; i < 200; i++ {
		to := filepath.Join(dstDir, "copy")
		os.RemoveAll(to)
		if err := copyTreeAt(src, to); err != nil {
			failures++
			continue
		}
		copies++
		filepath.Walk(to, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				if b, _ := os.ReadFile(p); strings.Contains(string(b), "ROOT-ONLY-SECRET") {
					t.Fatalf("the copy followed a swapped-in link: %s holds the secret", p)
				}
			}
			return nil
		})
	}
	stop.Store(true)
	<-done
	if swaps.Load() == 0 {
		t.Fatal("the swapper never swapped: the test proved nothing")
	}
	t.Logf("%d copies, %d refused, %d swaps", copies, failures, swaps.Load())
}
