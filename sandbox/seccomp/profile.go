package seccomp

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	moby "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Kernel is a kernel's version, as the profile's minKernel compares it.
type Kernel struct{ Major, Minor uint64 }

// ParseKernel reads a kernel release ("6.1.0-18-amd64").
func ParseKernel(release string) (Kernel, error) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return Kernel{}, fmt.Errorf("kernel release %q is not <major>.<minor>", release)
	}
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	maj, err1 := strconv.ParseUint(parts[0], 10, 16)
	mnr, err2 := strconv.ParseUint(minor, 10, 16)
	if err1 != nil || err2 != nil {
		return Kernel{}, fmt.Errorf("kernel release %q is not <major>.<minor>", release)
	}
	return Kernel{maj, mnr}, nil
}

func (k Kernel) atLeast(v Kernel) bool {
	return k.Major > v.Major || k.Major == v.Major && k.Minor >= v.Minor
}

func fromMoby(v *moby.KernelVersion) Kernel { return Kernel{v.Kernel, v.Major} }

// newestMinKernel is the newest minKernel the profile names: a program
// compiled for it holds on every newer kernel.
func newestMinKernel() Kernel {
	var k Kernel
	for _, s := range moby.DefaultProfile().Syscalls {
		for _, f := range []*moby.Filter{s.Includes, s.Excludes} {
			if f != nil && f.MinKernel != nil && !k.atLeast(fromMoby(f.MinKernel)) {
				k = fromMoby(f.MinKernel)
			}
		}
	}
	return k
}

// profileRules is Docker's default profile as it applies to a container
// with no capabilities on arch a and kernel k (what dockerd makes of it for
// `docker run` without --cap-add): its rules in its order, and its default
// action. The profile's other ABIs (i386, x32) are not taken: the program
// kills or refuses them before any rule.
func profileRules(a arch, k Kernel) ([]rule, uint32, error) {
	p := moby.DefaultProfile()
	dflt, err := action(p.DefaultAction, p.DefaultErrnoRet)
	if err != nil {
		return nil, 0, fmt.Errorf("the profile's default action: %w", err)
	}
	var rs []rule
	for _, s := range p.Syscalls {
		if !applies(s, a.profile, k) {
			continue
		}
		// Names only: a rule given by the deprecated Name names no call
		// here, so its calls stay refused.
		names := s.Names
		act, err := action(s.Action, s.ErrnoRet)
		if err != nil {
			return nil, 0, fmt.Errorf("the profile's rule for %s: %w", strings.Join(names, ", "), err)
		}
		set, err := conditions(s.Args)
		if err != nil {
			return nil, 0, fmt.Errorf("the profile's rule for %s: %w", strings.Join(names, ", "), err)
		}
		r := rule{names: names, action: act}
		if set != nil {
			r.sets = [][]cond{set}
		}
		rs = append(rs, r)
	}
	return rs, dflt, nil
}

// applies is dockerd's reading of a rule's includes and excludes for a
// container that holds no capability: a rule that needs one is out, a rule
// excluded for one stays.
func applies(s *moby.Syscall, arch string, k Kernel) bool {
	if e := s.Excludes; e != nil {
		if slices.Contains(e.Arches, arch) || e.MinKernel != nil && k.atLeast(fromMoby(e.MinKernel)) {
			return false
		}
	}
	if i := s.Includes; i != nil {
		if len(i.Arches) > 0 && !slices.Contains(i.Arches, arch) || len(i.Caps) > 0 || i.MinKernel != nil && !k.atLeast(fromMoby(i.MinKernel)) {
			return false
		}
	}
	return true
}

// action is a profile action as the program returns it.
func action(a specs.LinuxSeccompAction, errno *uint) (uint32, error) {
	switch a {
	case specs.ActAllow:
		return retAllow, nil
	case specs.ActErrno:
		e := uint(errEPERM) // libseccomp's default
		if errno != nil {
			e = *errno
		}
		if e > 0xffff {
			return 0, fmt.Errorf("errno %d out of range", e)
		}
		return retErrno | uint32(e), nil
	case specs.ActKillProcess:
		return retKillProcess, nil
	case specs.ActKill, specs.ActKillThread:
		return retKillThread, nil
	case specs.ActTrap:
		return retTrap, nil
	case specs.ActLog:
		return retLog, nil
	}
	return 0, fmt.Errorf("action %s is not supported in the jail's program", a)
}

// conditions is a rule's argument comparisons, all of which must hold
// (libseccomp's reading), compared on all 64 bits as libseccomp does on a
// 64-bit arch: for a rule that allows, a stray high bit only refuses more.
// Two comparisons of one argument are refused: runc ORs them, crun ANDs
// them, and the program must not guess.
func conditions(args []specs.LinuxSeccompArg) ([]cond, error) {
	var set []cond
	seen := map[uint]bool{}
	for _, a := range args {
		if a.Index > 5 {
			return nil, fmt.Errorf("argument %d: a system call has six", a.Index)
		}
		if seen[a.Index] {
			return nil, fmt.Errorf("two comparisons of argument %d", a.Index)
		}
		seen[a.Index] = true
		c := cond{arg: int(a.Index), val: a.Value, val2: a.ValueTwo}
		switch a.Op {
		case specs.OpEqualTo:
			c.op = opEq
		case specs.OpNotEqual:
			c.op = opNe
		case specs.OpLessThan:
			c.op = opLt
		case specs.OpLessEqual:
			c.op = opLe
		case specs.OpGreaterThan:
			c.op = opGt
		case specs.OpGreaterEqual:
			c.op = opGe
		case specs.OpMaskedEqual:
			c.op = opMasked
		default:
			return nil, fmt.Errorf("comparison %s is not supported", a.Op)
		}
		set = append(set, c)
	}
	return set, nil
}
