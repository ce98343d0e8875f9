package seccomp

import (
	"fmt"
	"slices"

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

// leafMax bounds the calls one leaf of the dispatch tree tests one by one.
const leafMax = 8

// compile lays out the program: the arch and ABI checks, then a binary
// search on the syscall number down to leaves of a few calls, each call's
// block after its leaf. A block judges one call's arguments and always
// returns, so nothing after an argument load ever reads the number again.
// Every jump goes forward, and a subtree is jumped over with a `ja` when
// it is too long for a conditional jump.
func compile(a arch, nums map[string]uint32, rules []rule, dflt uint32) ([]bpf.Instruction, error) {
	byNR := map[uint32][]rule{}
	var maxNR uint32
	for _, n := range nums {
		maxNR = max(maxNR, n)
	}
	for _, r := range rules {
		for _, name := range r.names {
			if n, ok := nums[name]; ok { // a call the arch lacks cannot be made
				byNR[n] = append(byNR[n], r)
			}
		}
	}
	var es []entry
	for _, n := range slices.Sorted(func(yield func(uint32) bool) {
		for n := range byNR {
			if !yield(n) {
				return
			}
		}
	}) {
		code, err := block(byNR[n], dflt)
		if err != nil {
			return nil, fmt.Errorf("syscall %d: %w", n, err)
		}
		if len(code) == 1 && code[0] == (bpf.RetConstant{Val: dflt}) {
			continue // judged as the default would
		}
		es = append(es, entry{n, code})
	}
	var p asm
	p.op(bpf.LoadAbsolute{Off: offArch, Size: 4})
	p.jump(bpf.JumpEqual, a.audit, "native", "")
	p.ret(retKillProcess) // i386 through int 0x80, arm32: another table
	p.label("native")
	p.op(bpf.LoadAbsolute{Off: offNR, Size: 4})
	if a.x32 {
		p.jump(bpf.JumpBitsSet, x32Bit, "", "not-x32")
		p.ret(retErrno | errEPERM)
		p.label("not-x32")
	}
	// A call newer than the table: ENOSYS, so that callers fall back as
	// on an older kernel.
	p.jump(bpf.JumpGreaterThan, maxNR, "", "known")
	p.ret(retErrno | errENOSYS)
	p.label("known")
	head, err := p.resolve()
	if err != nil {
		return nil, err
	}
	t, err := tree(es, dflt)
	if err != nil {
		return nil, err
	}
	return append(head, t...), nil
}

// entry is one call the program does not leave to the default: its number
// and its block.
type entry struct {
	nr   uint32
	code []bpf.Instruction
}

// tree is the dispatch over es (sorted by number): self-contained code in
// which every path returns.
func tree(es []entry, dflt uint32) ([]bpf.Instruction, error) {
	if len(es) <= leafMax {
		l, err := leaf(es, dflt)
		if err == nil || len(es) == 1 {
			return l, err
		}
	}
	mid := len(es) / 2
	left, err := tree(es[:mid], dflt)
	if err != nil {
		return nil, err
	}
	right, err := tree(es[mid:], dflt)
	if err != nil {
		return nil, err
	}
	pivot := es[mid-1].nr
	var out []bpf.Instruction
	if len(left) <= 255 {
		out = append(out, bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: pivot, SkipTrue: uint8(len(left))})
	} else {
		out = append(out, bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: pivot, SkipFalse: 1}, bpf.Jump{Skip: uint32(len(left))})
	}
	return append(append(out, left...), right...), nil
}

// leaf compares the number with each of es in turn and jumps to its block;
// none: the default. The calls whose block is a plain allow share one.
func leaf(es []entry, dflt uint32) ([]bpf.Instruction, error) {
	allow := []bpf.Instruction{bpf.RetConstant{Val: retAllow}}
	var p asm
	var blocks [][]bpf.Instruction
	for i, e := range es {
		target := fmt.Sprint("block", i)
		if slices.Equal(e.code, allow) {
			target = "allow"
		} else {
			blocks = append(blocks, e.code)
		}
		p.jump(bpf.JumpEqual, e.nr, target, "")
	}
	p.ret(dflt)
	if len(blocks) < len(es) {
		p.label("allow")
		p.ret(retAllow)
	}
	b := 0
	for i, e := range es {
		if slices.Equal(e.code, allow) {
			continue
		}
		p.label(fmt.Sprint("block", i))
		for _, ins := range blocks[b] {
			p.op(ins)
		}
		b++
	}
	return p.resolve()
}

// block judges one call: its rules in order, the first that holds gives
// the answer, none: the default. It always returns.
func block(rules []rule, dflt uint32) ([]bpf.Instruction, error) {
	var p asm
	for ri, r := range rules {
		if len(r.sets) == 0 {
			p.ret(r.action)
			return p.resolve()
		}
		for si, set := range r.sets {
			next := fmt.Sprintf("rule%d-set%d", ri, si)
			for _, c := range set {
				c.emit(&p, next)
			}
			p.ret(r.action)
			p.label(next)
		}
	}
	p.ret(dflt)
	return p.resolve()
}

// emit falls through when c holds and jumps to fail when it does not.
func (c cond) emit(p *asm, fail string) {
	lo, hi := uint32(c.val), uint32(c.val>>32)
	lo2, hi2 := uint32(c.val2), uint32(c.val2>>32)
	low := func() { p.op(bpf.LoadAbsolute{Off: argLow(c.arg), Size: 4}) }
	high := func() { p.op(bpf.LoadAbsolute{Off: argHigh(c.arg), Size: 4}) }
	if c.low {
		low()
		switch c.op {
		case opEq:
			p.jump(bpf.JumpEqual, lo, "", fail)
		case opNe:
			p.jump(bpf.JumpNotEqual, lo, "", fail)
		case opLt:
			p.jump(bpf.JumpLessThan, lo, "", fail)
		case opLe:
			p.jump(bpf.JumpLessOrEqual, lo, "", fail)
		case opGt:
			p.jump(bpf.JumpGreaterThan, lo, "", fail)
		case opGe:
			p.jump(bpf.JumpGreaterOrEqual, lo, "", fail)
		case opMasked:
			p.op(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: lo})
			p.jump(bpf.JumpEqual, lo2, "", fail)
		case opAny:
			p.jump(bpf.JumpBitsSet, lo, "", fail)
		}
		return
	}
	pass := p.fresh()
	switch c.op {
	case opEq:
		high()
		p.jump(bpf.JumpEqual, hi, "", fail)
		low()
		p.jump(bpf.JumpEqual, lo, "", fail)
	case opNe:
		high()
		p.jump(bpf.JumpNotEqual, hi, pass, "")
		low()
		p.jump(bpf.JumpNotEqual, lo, "", fail)
	case opLt, opLe, opGt, opGe:
		// The high words decide unless they are equal; then the low ones.
		above, final := bpf.JumpGreaterThan, map[op]bpf.JumpTest{opLt: bpf.JumpLessThan, opLe: bpf.JumpLessOrEqual,
			opGt: bpf.JumpGreaterThan, opGe: bpf.JumpGreaterOrEqual}[c.op]
		if c.op == opLt || c.op == opLe {
			above = bpf.JumpLessThan
		}
		high()
		p.jump(above, hi, pass, "")
		p.jump(bpf.JumpEqual, hi, "", fail)
		low()
		p.jump(final, lo, "", fail)
	case opMasked:
		high()
		p.op(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: hi})
		p.jump(bpf.JumpEqual, hi2, "", fail)
		low()
		p.op(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: lo})
		p.jump(bpf.JumpEqual, lo2, "", fail)
	case opAny:
		if hi != 0 {
			high()
			p.jump(bpf.JumpBitsSet, hi, pass, "")
		}
		low()
		p.jump(bpf.JumpBitsSet, lo, "", fail)
	}
	p.label(pass)
}

// asm lays out a classic BPF program with forward jumps to labels, so that
// no skip count is worked out by hand.
type asm struct {
	ins    []bpf.Instruction
	labels map[string]int
	jumps  []pendingJump
	n      int
}

type pendingJump struct {
	at          int
	cond        bpf.JumpTest
	val         uint32
	ifTrue, ifF string // "" is the next instruction
}

func (a *asm) op(i bpf.Instruction) { a.ins = append(a.ins, i) }
func (a *asm) ret(v uint32)         { a.op(bpf.RetConstant{Val: v}) }

// fresh is a label name not used before.
func (a *asm) fresh() string {
	a.n++
	return fmt.Sprint("\x00", a.n)
}

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
