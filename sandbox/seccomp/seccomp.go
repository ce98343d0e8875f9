// Package seccomp builds the jail's seccomp program. It refuses what
// Docker's default profile refuses to a container with no capabilities
// (github.com/moby/profiles/seccomp, read as data: no call is listed
// here), and before that cco's own rules: no setuid or setgid mode, no
// TIOCSTI or TIOCLINUX, ENOSYS for openat2 and io_uring, no keyring calls.
// A foreign arch (i386 through int 0x80, arm32) kills the process and an
// x32 call is refused. bwrap loads the program from a file descriptor
// (--seccomp) and sets NO_NEW_PRIVS. ADRs 14, 19 and 29 give the reasons.
package seccomp

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Program is the filter for goarch ("amd64" or "arm64") on kernel k.
func Program(goarch string, k Kernel) ([]bpf.Instruction, error) {
	return program(goarch, k, numbers(goarch))
}

func program(goarch string, k Kernel, nums map[string]uint32) ([]bpf.Instruction, error) {
	a, ok := arches[goarch]
	if !ok {
		return nil, fmt.Errorf("no seccomp program for %s (supported: amd64, arm64)", goarch)
	}
	profile, dflt, err := profileRules(a, k)
	if err != nil {
		return nil, fmt.Errorf("reading Docker's seccomp profile: %w", err)
	}
	return compile(a, nums, append(ownRules(), profile...), dflt)
}

// The programs for kernels from programKernel on, compiled ahead
// (TestGenerated holds them to Program): every launch waits for the
// program, and compiling it in a fresh process takes a millisecond or two.
var (
	//go:embed program_amd64.bpf
	programAMD64 string
	//go:embed program_arm64.bpf
	programARM64 string
)

// Bytes is the program for this machine and its kernel, in the form bwrap
// reads: each instruction little-endian as u16 code, u8 jt, u8 jf, u32 k.
func Bytes() ([]byte, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return nil, fmt.Errorf("the kernel's release: %w", err)
	}
	k, err := ParseKernel(unix.ByteSliceToString(u.Release[:]))
	if err != nil {
		return nil, err
	}
	return bytesFor(runtime.GOARCH, k)
}

func bytesFor(goarch string, k Kernel) ([]byte, error) {
	if k.atLeast(programKernel) {
		switch goarch {
		case "amd64":
			return []byte(programAMD64), nil
		case "arm64":
			return []byte(programARM64), nil
		}
	}
	return compileBytes(goarch, k)
}

// compileBytes compiles the program for goarch and k, and encodes it.
func compileBytes(goarch string, k Kernel) ([]byte, error) {
	p, err := Program(goarch, k)
	if err != nil {
		return nil, err
	}
	return encode(p)
}

func encode(p []bpf.Instruction) ([]byte, error) {
	raw, err := bpf.Assemble(p)
	if err != nil {
		return nil, fmt.Errorf("assembling the seccomp program: %w", err)
	}
	if len(raw) > bpfMaxInsns {
		return nil, fmt.Errorf("the seccomp program has %d instructions, more than the kernel's %d", len(raw), bpfMaxInsns)
	}
	b := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		b = binary.LittleEndian.AppendUint16(b, r.Op)
		b = append(b, r.Jt, r.Jf)
		b = binary.LittleEndian.AppendUint32(b, r.K)
	}
	return b, nil
}

// bpfMaxInsns is BPF_MAXINSNS, the longest program seccomp loads.
const bpfMaxInsns = 4096

// sysnum is one arch's number for a syscall.
type sysnum struct {
	arch, name string
	nr         uint32
}

// numbers is goarch's syscall numbers by name.
func numbers(goarch string) map[string]uint32 { return numbersByArch()[goarch] }

var numbersByArch = sync.OnceValue(func() map[string]map[string]uint32 {
	m := map[string]map[string]uint32{}
	for _, s := range syscallTable {
		if m[s.arch] == nil {
			m[s.arch] = map[string]uint32{}
		}
		m[s.arch][s.name] = s.nr
	}
	return m
})
