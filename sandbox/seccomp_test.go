package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
)

// vmProgram turns the bytes bwrap would get back into instructions, so the
// VM runs exactly what ships.
func vmProgram(t *testing.T, goarch string) *bpf.VM {
	t.Helper()
	b, err := seccompBytes(goarch)
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%8 != 0 {
		t.Fatalf("program length %d is not a multiple of 8", len(b))
	}
	var raw []bpf.RawInstruction
	for i := 0; i < len(b); i += 8 {
		raw = append(raw, bpf.RawInstruction{
			Op: binary.LittleEndian.Uint16(b[i:]), Jt: b[i+2], Jf: b[i+3], K: binary.LittleEndian.Uint32(b[i+4:]),
		})
	}
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("program does not disassemble")
	}
	vm, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// seccompData lays out a synthetic struct seccomp_data as a little-endian
// kernel sees it, word by word. x/net/bpf's VM loads words big-endian (it
// is a packet filter), the kernel loads them native-endian; writing each
// 32-bit word big-endian at its little-endian position makes the VM see
// the same word values the kernel would.
func seccompData(nr, arch uint32, arg1 uint64) []byte {
	d := make([]byte, 64)
	binary.BigEndian.PutUint32(d[0:], nr)
	binary.BigEndian.PutUint32(d[4:], arch)
	binary.BigEndian.PutUint32(d[24:], uint32(arg1))
	binary.BigEndian.PutUint32(d[28:], uint32(arg1>>32))
	return d
}

func TestSeccompVM(t *testing.T) {
	const (
		amd64, arm64, i386, arm = 0xc000003e, 0xc00000b7, 0x40000003, 0x40000028
		allow, eperm, kill      = retAllow, retErrno | 1, retKillProc
	)
	for _, tc := range []struct {
		name   string
		goarch string
		nr     uint32
		arch   uint32
		arg1   uint64
		want   uint32
	}{
		{"amd64 TIOCSTI", "amd64", 16, amd64, 0x5412, eperm},
		{"amd64 TIOCSTI high bits", "amd64", 16, amd64, 0x1_00005412, eperm},
		{"amd64 TIOCSTI all high bits", "amd64", 16, amd64, 0xffffffff_00005412, eperm},
		{"amd64 TIOCLINUX", "amd64", 16, amd64, 0x541c, eperm},
		{"amd64 TIOCLINUX high bits", "amd64", 16, amd64, 0x8_0000541c, eperm},
		{"amd64 TCGETS", "amd64", 16, amd64, 0x5401, allow},
		{"amd64 TIOCGWINSZ", "amd64", 16, amd64, 0x5413, allow},
		{"amd64 request only in high word", "amd64", 16, amd64, 0x5412_00000000, allow},
		{"amd64 read", "amd64", 0, amd64, 0x5412, allow},
		{"amd64 x32 ioctl", "amd64", 0x40000000 | 514, amd64, 0x5412, eperm},
		{"amd64 x32 read", "amd64", 0x40000000, amd64, 0, eperm},
		{"amd64 x32 any", "amd64", 0x40000000 | 1, amd64, 0, eperm},
		{"i386 on amd64 (int 0x80)", "amd64", 54, i386, 0x5412, kill},
		{"i386 harmless on amd64", "amd64", 3, i386, 0, kill},
		{"arm64 arch on amd64", "amd64", 29, arm64, 0x5412, kill},
		{"arm64 TIOCSTI", "arm64", 29, arm64, 0x5412, eperm},
		{"arm64 TIOCSTI high bits", "arm64", 29, arm64, 0x1_00005412, eperm},
		{"arm64 TIOCLINUX", "arm64", 29, arm64, 0x541c, eperm},
		{"arm64 TCGETS", "arm64", 29, arm64, 0x5401, allow},
		{"arm64 nr 16 is not ioctl", "arm64", 16, arm64, 0x5412, allow},
		{"arm64 high nr not x32", "arm64", 0x40000000 | 29, arm64, 0x5412, allow},
		{"arm32 on arm64", "arm64", 54, arm, 0x5412, kill},
		{"amd64 arch on arm64", "arm64", 16, amd64, 0x5412, kill},
	} {
		got, err := vmProgram(t, tc.goarch).Run(seccompData(tc.nr, tc.arch, tc.arg1))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if uint32(got) != tc.want {
			t.Errorf("%s: got %#x, want %#x", tc.name, uint32(got), tc.want)
		}
	}
}

func TestSeccompUnknownArch(t *testing.T) {
	if _, err := SeccompProgram("riscv64"); err == nil {
		t.Fatal("riscv64 gave a program")
	}
}
