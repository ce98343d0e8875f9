package seccomp

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"

	moby "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// dockerd is the profile as dockerd hands it to runc for a container with
// no capabilities: moby's own reading on this machine's arch and kernel,
// and on the other arch the test's reading of the same includes and
// excludes (which TestProfileAsDockerd holds to moby's on this one).
func dockerd(t *testing.T, goarch string) *specs.LinuxSeccomp {
	t.Helper()
	if goarch == runtime.GOARCH {
		p, err := moby.GetDefaultProfile(&specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return readProfile(moby.DefaultProfile(), arches[goarch].profile, testKernel)
}

// readProfile keeps the rules that hold for arch and kernel k with no
// capability held.
func readProfile(p *moby.Seccomp, arch string, k Kernel) *specs.LinuxSeccomp {
	out := p.LinuxSeccomp
	out.Syscalls = nil
	older := func(v *moby.KernelVersion) bool {
		return k.Major < v.Kernel || k.Major == v.Kernel && k.Minor < v.Major
	}
	for _, s := range p.Syscalls {
		if e := s.Excludes; e != nil && (slices.Contains(e.Arches, arch) || e.MinKernel != nil && !older(e.MinKernel)) {
			continue
		}
		if i := s.Includes; i != nil && ((len(i.Arches) > 0 && !slices.Contains(i.Arches, arch)) || len(i.Caps) > 0 || i.MinKernel != nil && older(i.MinKernel)) {
			continue
		}
		out.Syscalls = append(out.Syscalls, s.LinuxSyscall)
	}
	return &out
}

func liveKernel(t *testing.T) Kernel {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	k, err := ParseKernel(unix.ByteSliceToString(u.Release[:]))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestProfileAsDockerd: on this machine, the program's reading of the
// profile and the test's are both moby's own, rule for rule.
func TestProfileAsDockerd(t *testing.T) {
	goarch := runtime.GOARCH
	if _, ok := arches[goarch]; !ok {
		t.Skipf("no program for %s", goarch)
	}
	k := liveKernel(t)
	want := dockerd(t, goarch)
	describe := func(names []string, act string, args any) string {
		return fmt.Sprintf("%s %s %v", strings.Join(names, ","), act, args)
	}
	var fromMoby, fromTest []string
	for _, s := range want.Syscalls {
		fromMoby = append(fromMoby, describe(s.Names, fmt.Sprint(s.Action, s.ErrnoRet != nil && *s.ErrnoRet == errENOSYS), s.Args))
	}
	for _, s := range readProfile(moby.DefaultProfile(), arches[goarch].profile, k).Syscalls {
		fromTest = append(fromTest, describe(s.Names, fmt.Sprint(s.Action, s.ErrnoRet != nil && *s.ErrnoRet == errENOSYS), s.Args))
	}
	if !slices.Equal(fromMoby, fromTest) {
		t.Errorf("the test's reading of the profile differs from moby's:\nmoby %q\ntest %q", fromMoby, fromTest)
	}
	rs, dflt, err := profileRules(arches[goarch], k)
	if err != nil {
		t.Fatal(err)
	}
	if dflt != retErrno|errEPERM {
		t.Errorf("default action %#x, want EPERM", dflt)
	}
	if len(rs) != len(want.Syscalls) {
		t.Fatalf("the program takes %d rules, moby %d", len(rs), len(want.Syscalls))
	}
	for i, r := range rs {
		s := want.Syscalls[i]
		act, err := action(s.Action, s.ErrnoRet)
		if err != nil || !slices.Equal(r.names, s.Names) || r.action != act || (len(s.Args) > 0) != (len(r.sets) == 1) {
			t.Errorf("rule %d: program %v %#x %d sets, moby %v %s %v", i, r.names, r.action, len(r.sets), s.Names, s.Action, s.Args)
		}
	}
}

// TestProfileNames: every call the profile names is a call some arch's
// table knows (else the table's names and libseccomp's differ, and a call
// the profile allows would be refused), but ARM's private calls, which
// x/sys/unix does not list.
func TestProfileNames(t *testing.T) {
	known := map[string]bool{}
	for _, goarch := range []string{"386", "amd64", "arm", "arm64", "loong64", "mips", "mips64", "mips64le", "mipsle", "ppc", "ppc64", "ppc64le", "riscv64", "s390x"} {
		maps.Copy(known, func() map[string]bool {
			m := map[string]bool{}
			for n := range xsysNumbers(t, goarch) {
				m[n] = true
			}
			return m
		}())
	}
	armPrivate := map[string]bool{"breakpoint": true, "set_tls": true} // __ARM_NR_*
	for _, s := range moby.DefaultProfile().Syscalls {
		for _, n := range s.Names {
			if !known[n] && !armPrivate[n] {
				t.Errorf("the profile names %q, which no x/sys/unix table has", n)
			}
		}
	}
}

// reference is what the program must answer, worked out apart from it:
// the arch and ABI checks, cco's rules, then the profile as libseccomp
// reads it (the first rule for the call whose comparisons all hold, on 64
// bits; none: the default).
type reference struct {
	goarch  string
	names   map[uint32]string
	maxNR   uint32
	profile *specs.LinuxSeccomp
	dflt    uint32
}

func newReference(t *testing.T, goarch string) *reference {
	r := &reference{goarch: goarch, names: map[uint32]string{}, profile: dockerd(t, goarch)}
	for n, nr := range numbers(goarch) {
		r.names[nr] = n
		r.maxNR = max(r.maxNR, nr)
	}
	var err error
	if r.dflt, err = action(r.profile.DefaultAction, r.profile.DefaultErrnoRet); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *reference) verdict(arch, nr uint32, args [6]uint64) uint32 {
	switch {
	case arch != audit[r.goarch]:
		return kill
	case arches[r.goarch].x32 && nr&x32Bit != 0:
		return eperm
	case nr > r.maxNR:
		return enosys
	}
	name, ok := r.names[nr]
	if !ok {
		return r.dflt
	}
	if v, ok := ownVerdict(name, args); ok {
		return v
	}
	return r.dockerVerdict(name, args)
}

// ownVerdict is cco's rules, as plain Go.
func ownVerdict(name string, args [6]uint64) (uint32, bool) {
	for _, c := range modeCalls {
		if c.name != name {
			continue
		}
		if (c.flags < 0 || uint32(args[c.flags])&createFlags != 0) && uint32(args[c.mode])&suidBits != 0 {
			return eperm, true
		}
	}
	switch {
	case name == "ioctl" && (uint32(args[1]) == tiocsti || uint32(args[1]) == tioclinux):
		return eperm, true
	case slices.Contains(nosysCalls, name):
		return enosys, true
	case slices.Contains(keyringCalls, name):
		return eperm, true
	}
	return 0, false
}

func (r *reference) dockerVerdict(name string, args [6]uint64) uint32 {
	for _, s := range r.profile.Syscalls {
		if !slices.Contains(s.Names, name) {
			continue
		}
		holds := true
		for _, a := range s.Args {
			v := args[a.Index]
			switch a.Op {
			case specs.OpEqualTo:
				holds = holds && v == a.Value
			case specs.OpNotEqual:
				holds = holds && v != a.Value
			case specs.OpLessThan:
				holds = holds && v < a.Value
			case specs.OpLessEqual:
				holds = holds && v <= a.Value
			case specs.OpGreaterThan:
				holds = holds && v > a.Value
			case specs.OpGreaterEqual:
				holds = holds && v >= a.Value
			case specs.OpMaskedEqual:
				holds = holds && v&a.Value == a.ValueTwo
			default:
				panic("comparison " + string(a.Op))
			}
		}
		if holds {
			act, _ := action(s.Action, s.ErrnoRet)
			return act
		}
	}
	return r.dflt
}

// argCases are the argument vectors worth trying for a call: around every
// value a rule compares with (its own, one off, with the high word set,
// with garbage above its bits), for each argument a rule reads, crossed.
func (r *reference) argCases(name string) [][6]uint64 {
	vals := map[int]map[uint64]bool{}
	add := func(i int, v uint64) {
		if vals[i] == nil {
			vals[i] = map[uint64]bool{0: true, 1: true, 0xffffffff: true, 1 << 32: true, ^uint64(0): true}
		}
		for _, x := range []uint64{v, v - 1, v + 1, v | 1<<32, v | 0xffffffff_00000000, uint64(uint32(v)), v << 1} {
			vals[i][x] = true
		}
		for b := 0; b < 64; b++ {
			if v&(1<<b) != 0 {
				vals[i][v&^(1<<b)] = true
				vals[i][1<<b] = true
			}
		}
	}
	for _, s := range r.profile.Syscalls {
		if slices.Contains(s.Names, name) {
			for _, a := range s.Args {
				add(int(a.Index), a.Value)
				add(int(a.Index), a.ValueTwo)
				add(int(a.Index), a.ValueTwo|^a.Value)
			}
		}
	}
	for _, rl := range ownRules() {
		if slices.Contains(rl.names, name) {
			for _, set := range rl.sets {
				for _, c := range set {
					add(c.arg, c.val)
					add(c.arg, c.val|0o644)
				}
			}
		}
	}
	garbage := [6]uint64{0xdeadbeef_cafe0000, 0x1234, 0xffff0000_00000000, 7, 0x8000_0000, 0x5555_5555_5555_5555}
	cases := [][6]uint64{garbage}
	for _, i := range slices.Sorted(maps.Keys(vals)) {
		var next [][6]uint64
		for _, c := range cases {
			for v := range vals[i] {
				c[i] = v
				next = append(next, c)
			}
		}
		cases = next
	}
	return cases
}

// TestEveryRefusal runs the shipped program in the VM for every syscall
// number of each arch (and past the table, and with the x32 bit, and from
// the foreign ABI), with the argument cases of each call's rules, and
// compares it with the reference. Above all: no call the profile refuses,
// or cco's rules refuse, is allowed.
func TestEveryRefusal(t *testing.T) {
	for goarch := range arches {
		t.Run(goarch, func(t *testing.T) {
			r := newReference(t, goarch)
			runs, refusals := 0, 0
			check := func(arch, nr uint32, args [6]uint64) {
				got := runVM(t, goarch, seccompData(nr, arch, args[:]...))
				want := r.verdict(arch, nr, args)
				runs++
				if want != allow {
					refusals++
				}
				if got == want {
					return
				}
				what := fmt.Sprintf("%s nr %d (%s, arch %#x) args %#x", goarch, nr, r.names[nr], arch, args)
				if got == allow {
					t.Errorf("LEAK: %s: the program allows what the reference refuses (%#x)", what, want)
				} else {
					t.Errorf("%s: got %#x, want %#x", what, got, want)
				}
			}
			for nr := uint32(0); nr <= r.maxNR+3; nr++ {
				name := r.names[nr]
				for _, args := range r.argCases(name) {
					check(audit[goarch], nr, args)
				}
				for _, foreign := range []uint32{auditI386, auditARM, auditAMD64, auditARM64} {
					if foreign != audit[goarch] {
						check(foreign, nr, [6]uint64{})
					}
				}
				check(audit[goarch], nr|x32Bit, [6]uint64{})
			}
			for _, nr := range []uint32{0x3fffffff, 0x7fffffff, 0x80000000, 0xffffffff} {
				check(audit[goarch], nr, [6]uint64{})
			}
			// The reference itself refuses what the profile is known to.
			for _, n := range []string{"bpf", "userfaultfd", "perf_event_open", "kexec_load", "init_module", "finit_module",
				"delete_module", "swapon", "swapoff", "reboot", "clock_settime", "settimeofday", "acct", "quotactl",
				"mount", "umount2", "unshare", "setns", "pivot_root", "ptrace_not_a_call", "keyctl", "add_key", "request_key",
				"open_by_handle_at", "clone3", "io_uring_setup", "openat2"} {
				if nr, ok := numbers(goarch)[n]; ok && r.verdict(audit[goarch], nr, [6]uint64{}) == allow {
					t.Errorf("the reference allows %s", n)
				}
			}
			// personality: the profile's values only.
			nr := numbers(goarch)["personality"]
			for v, want := range map[uint64]uint32{0: allow, 8: allow, 0x20000: allow, 0x20008: allow, 0xffffffff: allow,
				0x0400000: eperm /* ADDR_NO_RANDOMIZE */, 0x1: eperm, 0x1_00000000: eperm} {
				if got := runVM(t, goarch, seccompData(nr, audit[goarch], v)); got != want {
					t.Errorf("personality(%#x): got %#x, want %#x", v, got, want)
				}
			}
			t.Logf("%d cases, %d refused", runs, refusals)
			if refusals < 1000 || runs-refusals < 500 {
				t.Errorf("only %d cases, %d refused: the test does not try what it claims", runs, refusals)
			}
		})
	}
}
