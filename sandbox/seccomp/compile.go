package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// seccomp_data offsets (include/uapi/linux/seccomp.h): nr u32, arch u32,
// instruction_pointer u64, args[6] u64. The kernel loads native-endian
// 32-bit words, so on little-endian machines the low half of args[i] sits
// at 16+8i and the high half at 20+8i.
const (
	offNR   = 0
	offArch = 4
	offArgs = 16
)

func argLow(i int) uint32  { return offArgs + 8*uint32(i) }
func argHigh(i int) uint32 { return argLow(i) + 4 }

// compile lays out the program: the arch and ABI checks, then a binary
// search on the syscall number over ranges of numbers that share a verdict
// (most allowed calls lie in runs), down to the range's code. A call whose
// arguments count has a range, and a block, of its own. A block judges one
// call's arguments and always returns, so nothing after an argument load
// ever reads the number again. Every jump goes forward, and a subtree is
// jumped over with a `ja` when it is too long for a conditional jump.
func compile(a arch, nums map[string]uint32, rules []rule, dflt uint32) ([]bpf.Instruction, error) {
	var maxNR uint32
	for _, n := range nums {
		maxNR = max(maxNR, n)
	}
	byNR := make([][]rule, maxNR+1)
	for _, r := range rules {
		for _, name := range r.names {
			if n, ok := nums[name]; ok { // a call the arch lacks cannot be made
				byNR[n] = append(byNR[n], r)
			}
		}
	}
	deflt := []bpf.Instruction{bpf.RetConstant{Val: dflt}}
	var segs []segment
	for n, rs := range byNR {
		code := deflt
		if len(rs) > 0 {
			var err error
			if code, err = block(rs, dflt); err != nil {
				return nil, fmt.Errorf("syscall %d: %w", n, err)
			}
		}
		if last := len(segs) - 1; last >= 0 && len(code) == 1 && len(segs[last].code) == 1 && segs[last].code[0] == code[0] {
			segs[last].hi = uint32(n)
			continue
		}
		segs = append(segs, segment{hi: uint32(n), code: code})
	}
	var p asm
	native, notX32, known := p.newLabel(), p.newLabel(), p.newLabel()
	p.op(bpf.LoadAbsolute{Off: offArch, Size: 4})
	p.jump(bpf.JumpEqual, a.audit, native, next)
	p.ret(retKillProcess) // i386 through int 0x80, arm32: another table
	p.label(native)
	p.op(bpf.LoadAbsolute{Off: offNR, Size: 4})
	if a.x32 {
		p.jump(bpf.JumpBitsSet, x32Bit, next, notX32)
		p.ret(retErrno | errEPERM)
		p.label(notX32)
	}
	// A call newer than the table: ENOSYS, so that callers fall back as
	// on an older kernel.
	p.jump(bpf.JumpGreaterThan, maxNR, next, known)
	p.ret(retErrno | errENOSYS)
	p.label(known)
	head, err := p.resolve()
	if err != nil {
		return nil, err
	}
	return append(head, tree(segs)...), nil
}

// segment is a range of syscall numbers, from the previous segment's end
// up to hi, and the code that answers them, which always returns.
type segment struct {
	hi   uint32
	code []bpf.Instruction
}

// tree is the binary search over segs: self-contained code in which every
// path returns.
func tree(segs []segment) []bpf.Instruction {
	if len(segs) == 1 {
		return segs[0].code
	}
	mid := len(segs) / 2
	left, right := tree(segs[:mid]), tree(segs[mid:])
	pivot := segs[mid-1].hi
	var out []bpf.Instruction
	if len(left) <= 255 {
		out = append(out, bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: pivot, SkipTrue: uint8(len(left))})
	} else {
		out = append(out, bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: pivot, SkipFalse: 1}, bpf.Jump{Skip: uint32(len(left))})
	}
	return append(append(out, left...), right...)
}

var allowCode = []bpf.Instruction{bpf.RetConstant{Val: retAllow}}

// block judges one call: its rules in order, the first that holds gives
// the answer, none: the default. It always returns.
func block(rules []rule, dflt uint32) ([]bpf.Instruction, error) {
	if len(rules[0].sets) == 0 {
		if rules[0].action == retAllow {
			return allowCode, nil
		}
		return []bpf.Instruction{bpf.RetConstant{Val: rules[0].action}}, nil
	}
	// Each rule's sets, in order, as alternatives.
	type alt struct {
		action uint32
		set    []cond // nil: always
	}
	var alts []alt
	for _, r := range rules {
		if len(r.sets) == 0 {
			alts = append(alts, alt{r.action, nil})
			break
		}
		for _, set := range r.sets {
			alts = append(alts, alt{r.action, set})
		}
	}
	// eq is an alternative that is one equality.
	eq := func(a alt) (cond, bool) {
		if len(a.set) != 1 || a.set[0].op != opEq {
			return cond{}, false
		}
		return a.set[0], true
	}
	var p asm
	for i := 0; i < len(alts); i++ {
		a := alts[i]
		if a.set == nil {
			p.ret(a.action)
			return p.resolve()
		}
		// A run of equalities of one argument with one answer (the
		// profile's socket families and personality values, TIOCSTI and
		// TIOCLINUX) loads the argument once.
		c, ok := eq(a)
		j := i + 1
		for ok && j < len(alts) && alts[j].action == a.action {
			d, ok2 := eq(alts[j])
			if !ok2 || d.arg != c.arg || d.low != c.low || (!c.low && d.val>>32 != c.val>>32) {
				break
			}
			j++
		}
		if ok && j > i+1 {
			hit, miss := p.newLabel(), p.newLabel()
			if !c.low {
				p.op(bpf.LoadAbsolute{Off: argHigh(c.arg), Size: 4})
				p.jump(bpf.JumpEqual, uint32(c.val>>32), next, miss)
			}
			p.op(bpf.LoadAbsolute{Off: argLow(c.arg), Size: 4})
			for k := i; k < j; k++ {
				if k == j-1 {
					p.jump(bpf.JumpEqual, uint32(alts[k].set[0].val), hit, miss)
				} else {
					p.jump(bpf.JumpEqual, uint32(alts[k].set[0].val), hit, next)
				}
			}
			p.label(hit)
			p.ret(a.action)
			p.label(miss)
			i = j - 1
			continue
		}
		nextSet := p.newLabel()
		for _, c := range a.set {
			c.emit(&p, nextSet)
		}
		p.ret(a.action)
		p.label(nextSet)
	}
	p.ret(dflt)
	return p.resolve()
}

// emit falls through when c holds and jumps to fail when it does not.
func (c cond) emit(p *asm, fail label) {
	lo, hi := uint32(c.val), uint32(c.val>>32)
	lo2, hi2 := uint32(c.val2), uint32(c.val2>>32)
	low := func() { p.op(bpf.LoadAbsolute{Off: argLow(c.arg), Size: 4}) }
	high := func() { p.op(bpf.LoadAbsolute{Off: argHigh(c.arg), Size: 4}) }
	if c.low {
		low()
		switch c.op {
		case opEq:
			p.jump(bpf.JumpEqual, lo, next, fail)
		case opNe:
			p.jump(bpf.JumpNotEqual, lo, next, fail)
		case opLt:
			p.jump(bpf.JumpLessThan, lo, next, fail)
		case opLe:
			p.jump(bpf.JumpLessOrEqual, lo, next, fail)
		case opGt:
			p.jump(bpf.JumpGreaterThan, lo, next, fail)
		case opGe:
			p.jump(bpf.JumpGreaterOrEqual, lo, next, fail)
		case opMasked:
			p.op(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: lo})
			p.jump(bpf.JumpEqual, lo2, next, fail)
		case opAny:
			p.jump(bpf.JumpBitsSet, lo, next, fail)
		}
		return
	}
	pass := p.newLabel()
	switch c.op {
	case opEq:
		high()
		p.jump(bpf.JumpEqual, hi, next, fail)
		low()
		p.jump(bpf.JumpEqual, lo, next, fail)
	case opNe:
		high()
		p.jump(bpf.JumpNotEqual, hi, pass, next)
		low()
		p.jump(bpf.JumpNotEqual, lo, next, fail)
	case opLt, opLe, opGt, opGe:
		// The high words decide unless they are equal; then the low ones.
		above, final := bpf.JumpGreaterThan, map[op]bpf.JumpTest{opLt: bpf.JumpLessThan, opLe: bpf.JumpLessOrEqual,
			opGt: bpf.JumpGreaterThan, opGe: bpf.JumpGreaterOrEqual}[c.op]
		if c.op == opLt || c.op == opLe {
			above = bpf.JumpLessThan
		}
		high()
		p.jump(above, hi, pass, next)
		p.jump(bpf.JumpEqual, hi, next, fail)
		low()
		p.jump(final, lo, next, fail)
	case opMasked:
		high()
		p.op(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: hi})
		p.jump(bpf.JumpEqual, hi2, next, fail)
		low()
		p.op(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: lo})
		p.jump(bpf.JumpEqual, lo2, next, fail)
	case opAny:
		if hi != 0 {
			high()
			p.jump(bpf.JumpBitsSet, hi, pass, next)
		}
		low()
		p.jump(bpf.JumpBitsSet, lo, next, fail)
	}
	p.label(pass)
}

// asm lays out a classic BPF program with forward jumps to labels, so that
// no skip count is worked out by hand.
type asm struct {
	ins   []bpf.Instruction
	at    []int // where each label is, by label-1
	jumps []pendingJump
}

// label names a place in the program; next is the next instruction.
type label int

const next label = 0

type pendingJump struct {
	at          int
	cond        bpf.JumpTest
	val         uint32
	ifTrue, ifF label
}

func (a *asm) op(i bpf.Instruction) { a.ins = append(a.ins, i) }
func (a *asm) ret(v uint32)         { a.op(bpf.RetConstant{Val: v}) }

// newLabel is a label not used before, placed later with label.
func (a *asm) newLabel() label {
	a.at = append(a.at, -1)
	return label(len(a.at))
}

func (a *asm) label(l label) { a.at[l-1] = len(a.ins) }

func (a *asm) jump(cond bpf.JumpTest, val uint32, ifTrue, ifFalse label) {
	a.jumps = append(a.jumps, pendingJump{at: len(a.ins), cond: cond, val: val, ifTrue: ifTrue, ifF: ifFalse})
	a.op(nil) // filled in by resolve
}

func (a *asm) resolve() ([]bpf.Instruction, error) {
	skip := func(from int, l label) (uint8, error) {
		if l == next {
			return 0, nil
		}
		to := a.at[l-1]
		if to < 0 {
			return 0, fmt.Errorf("seccomp program: label %d is never placed", l)
		}
		d := to - from - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("seccomp program: jump from %d to %d out of reach", from, to)
		}
		return uint8(d), nil
	}
	for _, j := range a.jumps {
		t, err := skip(j.at, j.ifTrue)
		if err != nil {
			return nil, err
		}
		f, err := skip(j.at, j.ifF)
		if err != nil {
			return nil, err
		}
		a.ins[j.at] = bpf.JumpIf{Cond: j.cond, Val: j.val, SkipTrue: t, SkipFalse: f}
	}
	return a.ins, nil
}
