package sandbox

import (
	"encoding/binary"
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
)

// The seccomp program keeps a jailed process from pushing input into a
// terminal (TIOCSTI) or driving the console (TIOCLINUX). bwrap loads it
// from a file descriptor (--seccomp) and sets NO_NEW_PRIVS.

// seccomp_data offsets (include/uapi/linux/seccomp.h): nr u32, arch u32,
// instruction_pointer u64, args[6] u64. The kernel loads native-endian
// 32-bit words, so on little-endian machines the low half of args[1] (the
// ioctl request) sits at 24.
const (
	offNR       = 0
	offArch     = 4
	offArg1Low  = 24
	retKillProc = 0x80000000
	retErrno    = 0x00050000
	retAllow    = 0x7fff0000
	errEPERM    = 1
	x32Bit      = 0x40000000
	// TIOCSTI and TIOCLINUX; the kernel truncates the request to 32 bits,
	// so only the low word is compared (0x1_00005412 is TIOCSTI too).
	tiocsti   = 0x5412
	tioclinux = 0x541c
)

type seccompArch struct {
	audit uint32 // AUDIT_ARCH_*
	ioctl uint32 // ioctl's syscall number
	x32   bool   // the arch shares its audit value with an x32 ABI
}

var seccompArches = map[string]seccompArch{
	"amd64": {audit: 0xc000003e, ioctl: 16, x32: true},
	"arm64": {audit: 0xc00000b7, ioctl: 29},
}

// SeccompProgram is the filter for goarch ("amd64" or "arm64"): a foreign
// arch (i386 via int 0x80 on x86_64, arm32 on aarch64) kills the process,
// an x32 syscall number is refused, and ioctl(TIOCSTI/TIOCLINUX) fails with
// EPERM; everything else is allowed.
func SeccompProgram(goarch string) ([]bpf.Instruction, error) {
	a, ok := seccompArches[goarch]
	if !ok {
		return nil, fmt.Errorf("no seccomp program for %s (supported: amd64, arm64)", goarch)
	}
	p := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.audit, SkipTrue: 1},
		bpf.RetConstant{Val: retKillProc},
		bpf.LoadAbsolute{Off: offNR, Size: 4},
	}
	if a.x32 {
		p = append(p,
			bpf.JumpIf{Cond: bpf.JumpBitsNotSet, Val: x32Bit, SkipTrue: 1},
			bpf.RetConstant{Val: retErrno | errEPERM})
	}
	p = append(p,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.ioctl, SkipTrue: 1},
		bpf.RetConstant{Val: retAllow},
		bpf.LoadAbsolute{Off: offArg1Low, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: tiocsti, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: tioclinux, SkipTrue: 1},
		bpf.RetConstant{Val: retAllow},
		bpf.RetConstant{Val: retErrno | errEPERM},
	)
	return p, nil
}

// SeccompBytes is the program for this machine in the form bwrap reads:
// each instruction little-endian as u16 code, u8 jt, u8 jf, u32 k.
func SeccompBytes() ([]byte, error) { return seccompBytes(runtime.GOARCH) }

func seccompBytes(goarch string) ([]byte, error) {
	p, err := SeccompProgram(goarch)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(p)
	if err != nil {
		return nil, fmt.Errorf("assembling the seccomp program: %w", err)
	}
	b := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		b = binary.LittleEndian.AppendUint16(b, r.Op)
		b = append(b, r.Jt, r.Jf)
		b = binary.LittleEndian.AppendUint32(b, r.K)
	}
	return b, nil
}
