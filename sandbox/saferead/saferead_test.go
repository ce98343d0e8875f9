package saferead

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReadCapped(t *testing.T) {
	d := t.TempDir()
	ok := filepath.Join(d, "ok.json")
	os.WriteFile(ok, []byte("{}"), 0o600)
	fifo := filepath.Join(d, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(d, "zero")
	os.Symlink("/dev/zero", zero)
	big := filepath.Join(d, "big")
	os.WriteFile(big, make([]byte, MaxStateFile+1), 0o600)

	if b, err := ReadCapped(ok); err != nil || string(b) != "{}" {
		t.Errorf("regular file: %q, %v", b, err)
	}
	if _, err := ReadCapped(fifo); !errors.Is(err, errNotRegular) {
		t.Errorf("FIFO: %v, want not a regular file (and no hang)", err)
	}
	if _, err := ReadCapped(zero); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("link to /dev/zero: %v, want ELOOP", err)
	}
	if _, err := ReadCapped("/dev/zero"); !errors.Is(err, errNotRegular) {
		t.Errorf("/dev/zero: %v, want not a regular file", err)
	}
	if _, err := ReadCapped(big); err == nil {
		t.Error("a file over the cap was read")
	}
}
