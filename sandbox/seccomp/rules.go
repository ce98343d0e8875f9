package seccomp

// A rule says what a call returns, and when: when any one of its sets of
// conditions holds (every condition of the set), or always if it has none.
type rule struct {
	names  []string
	action uint32
	sets   [][]cond
}

// cond compares one argument of the call with a value.
type cond struct {
	arg       int
	op        op
	val, val2 uint64
	// low compares only the low 32 bits: the kernel reads an int (or a
	// umode_t) there, so the high word never counts, and a rule that
	// refuses must not be dodged by setting it (0x1_00005412 is TIOCSTI).
	low bool
}

type op int

const (
	opEq     op = iota // arg == val
	opNe               // arg != val
	opLt               // arg < val (unsigned)
	opLe               // arg <= val
	opGt               // arg > val
	opGe               // arg >= val
	opMasked           // arg & val == val2
	opAny              // arg & val != 0
)

// Return values of a seccomp program (include/uapi/linux/seccomp.h).
const (
	retKillProcess = 0x80000000
	retKillThread  = 0x00000000
	retTrap        = 0x00030000
	retErrno       = 0x00050000
	retLog         = 0x7ffc0000
	retAllow       = 0x7fff0000

	errEPERM  = 1
	errENOSYS = 38
)

// Constants of cco's own rules.
const (
	// x32Bit marks an x32 syscall number on x86_64 (__X32_SYSCALL_BIT).
	x32Bit = 0x40000000
	// TIOCSTI pushes input into a terminal; TIOCLINUX drives the console.
	tiocsti   = 0x5412
	tioclinux = 0x541c
	// S_ISUID|S_ISGID.
	suidBits = 0o6000
	// O_CREAT|__O_TMPFILE (the same on x86_64 and aarch64): only with one
	// of them does open read its mode; otherwise the register may hold
	// anything and must not be judged.
	createFlags = 0x40 | 0x400000
)

// modeCall is a call that can give a file a mode: the argument index of
// the mode, and of open's flags (-1 when the mode always counts).
type modeCall struct {
	name        string
	mode, flags int
}

// modeCalls are refused (EPERM) when the mode holds S_ISUID or S_ISGID
// (ADR 19): no session leaves a setuid or setgid file on the host.
var modeCalls = []modeCall{
	{"openat", 3, 2}, {"open", 2, 1}, {"creat", 1, -1},
	{"chmod", 1, -1}, {"fchmod", 1, -1}, {"fchmodat", 2, -1}, {"fchmodat2", 2, -1},
	{"mknod", 1, -1}, {"mknodat", 2, -1}, {"mkdir", 1, -1}, {"mkdirat", 2, -1},
}

// nosysCalls fail with ENOSYS, the answer of a kernel without them, so
// that callers fall back: openat2 keeps its mode in a struct the filter
// cannot read (its callers then use openat, whose mode it can), and
// io_uring's operations (openat, mkdirat and more) never pass seccomp.
var nosysCalls = []string{"openat2", "io_uring_setup", "io_uring_enter", "io_uring_register"}

// keyringCalls are refused whatever the profile says: the jail has a
// session keyring of its own, and no business with the kernel's keys.
var keyringCalls = []string{"keyctl", "add_key", "request_key"}

// ownRules are cco's rules, judged before the profile's: each refuses.
func ownRules() []rule {
	var rs []rule
	for _, c := range modeCalls {
		set := []cond{{arg: c.mode, op: opAny, val: suidBits, low: true}}
		if c.flags >= 0 {
			set = append([]cond{{arg: c.flags, op: opAny, val: createFlags, low: true}}, set...)
		}
		rs = append(rs, rule{names: []string{c.name}, action: retErrno | errEPERM, sets: [][]cond{set}})
	}
	rs = append(rs,
		rule{names: []string{"ioctl"}, action: retErrno | errEPERM, sets: [][]cond{
			{{arg: 1, op: opEq, val: tiocsti, low: true}},
			{{arg: 1, op: opEq, val: tioclinux, low: true}},
		}},
		rule{names: nosysCalls, action: retErrno | errENOSYS},
		rule{names: keyringCalls, action: retErrno | errEPERM},
	)
	return rs
}
