package sandbox

import (
	"encoding/binary"
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
)

// The seccomp program keeps a jailed process from pushing input into a
// terminal (TIOCSTI) or driving the console (TIOCLINUX), and from making a
// setuid or setgid file by any call. bwrap loads it from a file descriptor
// (--seccomp) and sets NO_NEW_PRIVS. ADR 14 and ADR 19 give the reasons.

// seccomp_data offsets (include/uapi/linux/seccomp.h): nr u32, arch u32,
// instruction_pointer u64, args[6] u64. The kernel loads native-endian
// 32-bit words, so on little-endian machines the low half of args[i] sits
// at 16+8i.
const (
	offNR       = 0
	offArch     = 4
	offArgs     = 16
	retKillProc = 0x80000000
	retErrno    = 0x00050000
	retAllow    = 0x7fff0000
	errEPERM    = 1
	errENOSYS   = 38
	x32Bit      = 0x40000000
	// TIOCSTI and TIOCLINUX; the kernel truncates the request to 32 bits,
	// so only the low word is compared (0x1_00005412 is TIOCSTI too).
	tiocsti   = 0x5412
	tioclinux = 0x541c
	// S_ISUID|S_ISGID. The kernel takes mode as umode_t (16 bits), so the
	// low word holds every bit it reads.
	suidBits = 0o6000
	// O_CREAT|__O_TMPFILE (the same on x86_64 and aarch64): only with one
	// of them does open read its mode; otherwise the register may hold
	// anything and must not be judged.
	createFlags = 0x40 | 0x400000
)

// modeCall is a call that can give a file a mode. flags is the argument
// index of open's flags, or -1 when the mode always counts.
type modeCall struct {
	name        string
	mode, flags int
}

// modeCalls are refused (EPERM) when the mode holds S_ISUID or S_ISGID.
// openat comes first: it is the most frequent call the filter must judge
// by its arguments (the kernel caches the verdict for every other call).
var modeCalls = []modeCall{
	{"openat", 3, 2}, {"open", 2, 1}, {"creat", 1, -1},
	{"chmod", 1, -1}, {"fchmod", 1, -1}, {"fchmodat", 2, -1}, {"fchmodat2", 2, -1},
	{"mknod", 1, -1}, {"mknodat", 2, -1}, {"mkdir", 1, -1}, {"mkdirat", 2, -1},
}

// nosysCalls fail with ENOSYS, the answer of a kernel without them, so that
// callers fall back. openat2 keeps its mode in a struct the filter cannot
// read (its callers take ENOSYS for an old kernel and use openat, whose
// mode it can); io_uring's operations (openat, mkdirat and more) never
// pass through seccomp at all.
var nosysCalls = []string{"openat2", "io_uring_setup", "io_uring_enter", "io_uring_register"}

type seccompArch struct {
	audit uint32            // AUDIT_ARCH_*
	x32   bool              // the arch shares its audit value with an x32 ABI
	nr    map[string]uint32 // syscall numbers; a call the arch lacks is absent
}

var seccompArches = map[string]seccompArch{
	"amd64": {audit: 0xc000003e, x32: true, nr: map[string]uint32{
		"ioctl": 16, "open": 2, "openat": 257, "creat": 85, "chmod": 90, "fchmod": 91, "fchmodat": 268,
		"fchmodat2": 452, "mknod": 133, "mknodat": 259, "mkdir": 83, "mkdirat": 258, "openat2": 437,
		"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
	}},
	"arm64": {audit: 0xc00000b7, nr: map[string]uint32{
		"ioctl": 29, "openat": 56, "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "mknodat": 33,
		"mkdirat": 34, "openat2": 437, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
	}},
}

// SeccompProgram is the filter for goarch ("amd64" or "arm64"): a foreign
// arch (i386 via int 0x80 on x86_64, arm32 on aarch64) kills the process,
// an x32 syscall number is refused, ioctl(TIOCSTI/TIOCLINUX) and every
// modeCall with S_ISUID or S_ISGID in its mode fail with EPERM, and the
// nosysCalls fail with ENOSYS; everything else is allowed.
func SeccompProgram(goarch string) ([]bpf.Instruction, error) {
	a, ok := seccompArches[goarch]
	if !ok {
		return nil, fmt.Errorf("no seccomp program for %s (supported: amd64, arm64)", goarch)
	}
	var p asm
	p.op(bpf.LoadAbsolute{Off: offArch, Size: 4})
	p.jump(bpf.JumpEqual, a.audit, "", "kill")
	p.op(bpf.LoadAbsolute{Off: offNR, Size: 4})
	if a.x32 {
		p.jump(bpf.JumpBitsSet, x32Bit, "eperm", "")
	}
	p.jump(bpf.JumpEqual, a.nr["ioctl"], "ioctl", "")
	// The argument blocks: open's flag checks, then the mode checks they
	// lead to, so that every jump goes forward.
	var flagBlocks, modeBlocks []modeCall
	seen := map[modeCall]bool{}
	need := func(b modeCall) {
		if seen[b] {
			return
		}
		seen[b] = true
		if b.flags >= 0 {
			flagBlocks = append(flagBlocks, b)
		} else {
			modeBlocks = append(modeBlocks, b)
		}
	}
	for _, c := range modeCalls {
		nr, ok := a.nr[c.name]
		if !ok {
			continue
		}
		b := modeCall{mode: c.mode, flags: c.flags}
		p.jump(bpf.JumpEqual, nr, b.label(), "")
		need(b)
		need(modeCall{mode: c.mode, flags: -1})
	}
	for _, n := range nosysCalls {
		if nr, ok := a.nr[n]; ok {
			p.jump(bpf.JumpEqual, nr, "enosys", "")
		}
	}
	p.ret(retAllow)

	p.label("ioctl")
	p.op(bpf.LoadAbsolute{Off: argLow(1), Size: 4})
	p.jump(bpf.JumpEqual, tiocsti, "eperm", "")
	p.jump(bpf.JumpEqual, tioclinux, "eperm", "")
	p.ret(retAllow)
	for _, b := range append(flagBlocks, modeBlocks...) {
		p.label(b.label())
		if b.flags >= 0 {
			p.op(bpf.LoadAbsolute{Off: argLow(b.flags), Size: 4})
			p.jump(bpf.JumpBitsSet, createFlags, modeCall{mode: b.mode, flags: -1}.label(), "")
			p.ret(retAllow)
			continue
		}
		p.op(bpf.LoadAbsolute{Off: argLow(b.mode), Size: 4})
		p.jump(bpf.JumpBitsSet, suidBits, "eperm", "")
		p.ret(retAllow)
	}
	p.label("eperm")
	p.ret(retErrno | errEPERM)
	p.label("enosys")
	p.ret(retErrno | errENOSYS)
	p.label("kill")
	p.ret(retKillProc)
	return p.resolve()
}

// label names the block that judges a call's arguments.
func (c modeCall) label() string { return fmt.Sprintf("mode%d-flags%d", c.mode, c.flags) }

// argLow is the offset of the low 32 bits of argument i.
func argLow(i int) uint32 { return offArgs + 8*uint32(i) }

// asm lays out a classic BPF program with forward jumps to labels, so that
// no skip count is worked out by hand.
type asm struct {
	ins    []bpf.Instruction
	labels map[string]int
	jumps  []pendingJump
}

type pendingJump struct {
	at          int
	cond        bpf.JumpTest
	val         uint32
	ifTrue, ifF string // "" is the next instruction
}

func (a *asm) op(i bpf.Instruction) { a.ins = append(a.ins, i) }
func (a *asm) ret(v uint32)         { a.op(bpf.RetConstant{Val: v}) }

func (a *asm) label(l string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[l] = len(a.ins)
}

func (a *asm) jump(cond bpf.JumpTest, val uint32, ifTrue, ifFalse string) {
	a.jumps = append(a.jumps, pendingJump{at: len(a.ins), cond: cond, val: val, ifTrue: ifTrue, ifF: ifFalse})
	a.op(nil) // filled in by resolve
}

func (a *asm) resolve() ([]bpf.Instruction, error) {
	skip := func(from int, l string) (uint8, error) {
		if l == "" {
			return 0, nil
		}
		to, ok := a.labels[l]
		if !ok {
			return 0, fmt.Errorf("seccomp program: no label %q", l)
		}
		d := to - from - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("seccomp program: jump from %d to %q (%d) out of reach", from, l, to)
		}
		return uint8(d), nil
	}
	out := append([]bpf.Instruction(nil), a.ins...)
	for _, j := range a.jumps {
		t, err := skip(j.at, j.ifTrue)
		if err != nil {
			return nil, err
		}
		f, err := skip(j.at, j.ifF)
		if err != nil {
			return nil, err
		}
		out[j.at] = bpf.JumpIf{Cond: j.cond, Val: j.val, SkipTrue: t, SkipFalse: f}
	}
	return out, nil
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
