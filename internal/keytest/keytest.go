// Package keytest gives a test an invoking session keyring of its own,
// holding a key as a login's keyring does, and checks it afterwards.
package keytest

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// Key is a key in a session keyring.
type Key struct {
	Ring, Serial  int
	Desc, Payload string
}

// possessorOnly is the key's permission: every right for a possessor,
// none for its owner or anyone else. Seeing it in /proc/keys, or reading
// it, then takes possessing it, through one's session keyring.
const possessorOnly = 0x3f000000

// Session locks the calling goroutine's thread for the rest of the test
// (the thread ends with it) and gives it a new session keyring holding one
// "user" key. Processes the test starts from this goroutine inherit the
// keyring, as a launch inherits the login's. The keyring and the key
// belong to owner: /proc/keys lists only keys whose owner the reader's
// user namespace maps, so a jail that runs as owner on the host sees them
// there exactly when it possesses them.
func Session(t testing.TB, owner int) Key {
	t.Helper()
	runtime.LockOSThread()
	if _, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); e != 0 {
		t.Fatalf("joining a session keyring: %v", e)
	}
	ring, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	k := Key{Ring: ring, Desc: "cco-test-" + tag, Payload: "CCO-SECRET-key-" + tag}
	if k.Serial, err = unix.AddKey("user", k.Desc, []byte(k.Payload), ring); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int{k.Serial, ring} {
		if _, err := unix.KeyctlInt(unix.KEYCTL_SETPERM, id, possessorOnly, 0, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.KeyctlInt(unix.KEYCTL_CHOWN, id, owner, owner, 0); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// Members lists the serials a keyring holds (nil if it cannot be read).
func Members(ring int) []int32 {
	buf := make([]byte, 4096)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, ring, buf, 0)
	if err != nil {
		return nil
	}
	out := []int32{}
	for i := 0; i+4 <= min(n, len(buf)); i += 4 {
		out = append(out, int32(binary.NativeEndian.Uint32(buf[i:])))
	}
	return out
}

// Unchanged fails t unless the calling thread's session keyring is still
// k.Ring, holding k's key alone, with its payload and permissions.
func (k Key) Unchanged(t testing.TB) {
	t.Helper()
	if now, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false); err != nil || now != k.Ring {
		t.Errorf("the invoking session's keyring is now %d (%v), was %d", now, err, k.Ring)
	}
	if m := Members(k.Ring); !slices.Equal(m, []int32{int32(k.Serial)}) {
		t.Errorf("the invoking session's keyring holds %v, was only %d", m, k.Serial)
	}
	buf := make([]byte, 256)
	if n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, k.Serial, buf, 0); err != nil || string(buf[:min(n, len(buf))]) != k.Payload {
		t.Errorf("the invoking session's key %d reads %q (%v), was %q", k.Serial, buf[:min(max(n, 0), len(buf))], err, k.Payload)
	}
	want := fmt.Sprintf(";%08x;%s", possessorOnly, k.Desc)
	if d, err := unix.KeyctlString(unix.KEYCTL_DESCRIBE, k.Serial); err != nil || len(d) < len(want) || d[len(d)-len(want):] != want {
		t.Errorf("the invoking session's key is now %q (%v), want its permissions and name %q", d, err, want)
	}
}
