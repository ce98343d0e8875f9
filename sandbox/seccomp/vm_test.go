package seccomp

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/net/bpf"
)

// testKernel is the kernel the VM tests build for: newer than every
// minKernel in the profile.
var testKernel = Kernel{6, 8}

var vms sync.Map // goarch -> *bpf.VM

// vm turns the bytes bwrap would get back into instructions, so the VM
// runs exactly what ships.
func vm(t testing.TB, goarch string) *bpf.VM {
	t.Helper()
	if v, ok := vms.Load(goarch); ok {
		return v.(*bpf.VM)
	}
	b, err := bytesFor(goarch, testKernel)
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
	v, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatal(err)
	}
	vms.Store(goarch, v)
	return v
}

// seccompData lays out a synthetic struct seccomp_data as a little-endian
// kernel sees it, word by word: nr, arch, and args from args[0]. x/net/bpf's
// VM loads words big-endian (it is a packet filter), the kernel loads them
// native-endian; writing each 32-bit word big-endian at its little-endian
// position makes the VM see the same word values the kernel would.
func seccompData(nr, arch uint32, args ...uint64) []byte {
	d := make([]byte, 64)
	binary.BigEndian.PutUint32(d[0:], nr)
	binary.BigEndian.PutUint32(d[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(d[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(d[20+8*i:], uint32(a>>32))
	}
	return d
}

func runVM(t testing.TB, goarch string, data []byte) uint32 {
	t.Helper()
	got, err := vm(t, goarch).Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(got)
}

const (
	auditAMD64, auditARM64, auditI386, auditARM = 0xc000003e, 0xc00000b7, 0x40000003, 0x40000028
	allow, eperm, enosys, kill                  = retAllow, retErrno | errEPERM, retErrno | errENOSYS, retKillProcess
)

var audit = map[string]uint32{"amd64": auditAMD64, "arm64": auditARM64}

// TestSeccompVM holds the bypasses that were found in other filters shut:
// a foreign arch is killed (i386 through int 0x80), an x32 number is
// refused, and an ioctl request is judged on its low 32 bits, the word the
// kernel reads.
func TestSeccompVM(t *testing.T) {
	for _, tc := range []struct {
		name   string
		goarch string
		nr     uint32
		arch   uint32
		arg1   uint64
		want   uint32
	}{
		{"amd64 TIOCSTI", "amd64", 16, auditAMD64, 0x5412, eperm},
		{"amd64 TIOCSTI high bits", "amd64", 16, auditAMD64, 0x1_00005412, eperm},
		{"amd64 TIOCSTI all high bits", "amd64", 16, auditAMD64, 0xffffffff_00005412, eperm},
		{"amd64 TIOCLINUX", "amd64", 16, auditAMD64, 0x541c, eperm},
		{"amd64 TIOCLINUX high bits", "amd64", 16, auditAMD64, 0x8_0000541c, eperm},
		{"amd64 TCGETS", "amd64", 16, auditAMD64, 0x5401, allow},
		{"amd64 TIOCGWINSZ", "amd64", 16, auditAMD64, 0x5413, allow},
		{"amd64 request only in high word", "amd64", 16, auditAMD64, 0x5412_00000000, allow},
		{"amd64 read", "amd64", 0, auditAMD64, 0x5412, allow},
		{"amd64 x32 ioctl", "amd64", 0x40000000 | 514, auditAMD64, 0x5412, eperm},
		{"amd64 x32 read", "amd64", 0x40000000, auditAMD64, 0, eperm},
		{"amd64 x32 any", "amd64", 0x40000000 | 1, auditAMD64, 0, eperm},
		{"amd64 number past the table", "amd64", 1000, auditAMD64, 0, enosys},
		{"amd64 number -1", "amd64", 0xffffffff, auditAMD64, 0, eperm},
		{"i386 on amd64 (int 0x80)", "amd64", 54, auditI386, 0x5412, kill},
		{"i386 harmless on amd64", "amd64", 3, auditI386, 0, kill},
		{"arm64 arch on amd64", "amd64", 29, auditARM64, 0x5412, kill},
		{"arm64 TIOCSTI", "arm64", 29, auditARM64, 0x5412, eperm},
		{"arm64 TIOCSTI high bits", "arm64", 29, auditARM64, 0x1_00005412, eperm},
		{"arm64 TIOCLINUX", "arm64", 29, auditARM64, 0x541c, eperm},
		{"arm64 TCGETS", "arm64", 29, auditARM64, 0x5401, allow},
		{"arm64 nr 16 is not ioctl", "arm64", 16, auditARM64, 0x5412, allow},
		{"arm64 high nr is not x32, but past the table", "arm64", 0x40000000 | 29, auditARM64, 0x5412, enosys},
		{"arm32 on arm64", "arm64", 54, auditARM, 0x5412, kill},
		{"amd64 arch on arm64", "arm64", 16, auditAMD64, 0x5412, kill},
	} {
		if got := runVM(t, tc.goarch, seccompData(tc.nr, tc.arch, 0, tc.arg1)); got != tc.want {
			t.Errorf("%s: got %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

func TestSeccompUnknownArch(t *testing.T) {
	if _, err := Program("riscv64", testKernel); err == nil {
		t.Fatal("riscv64 gave a program")
	}
}

// TestOpenFlags checks the open flags the program uses against x/sys/unix
// for each arch.
func TestOpenFlags(t *testing.T) {
	re := regexp.MustCompile(`(?m)^\s*O_(CREAT|TMPFILE|DIRECTORY)\s*=\s*(0x[0-9a-f]+|\d+)\s*$`)
	for goarch := range arches {
		b, err := os.ReadFile(filepath.Join(xsysDir(t), "zerrors_linux_"+goarch+".go"))
		if err != nil {
			t.Fatal(err)
		}
		f := map[string]uint64{}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			f[m[1]], _ = strconv.ParseUint(m[2], 0, 32)
		}
		if got := f["CREAT"] | (f["TMPFILE"] &^ f["DIRECTORY"]); got != createFlags || f["CREAT"] == 0 {
			t.Errorf("%s: O_CREAT|__O_TMPFILE = %#x, the program uses %#x", goarch, got, uint32(createFlags))
		}
	}
}

// TestSeccompModeBits runs every call that can set a mode, on each arch,
// with and without S_ISUID/S_ISGID, with the mode in its own argument and
// tempting bits in the others, so that a filter reading the wrong argument
// or the wrong word fails.
func TestSeccompModeBits(t *testing.T) {
	tmpfile := map[string]uint64{"amd64": 0x410000, "arm64": 0x404000}
	const oCreat, oWronly, oTrunc = 0x40, 0x1, 0x200
	for goarch := range arches {
		nums := numbers(goarch)
		for _, c := range modeCalls {
			nr, ok := nums[c.name]
			if !ok {
				continue
			}
			call := func(mode, flags, others uint64) []byte {
				args := make([]uint64, 6)
				for i := range args {
					args[i] = others
				}
				args[c.mode] = mode
				if c.flags >= 0 {
					args[c.flags] = flags
				}
				return seccompData(nr, audit[goarch], args...)
			}
			type tc struct {
				desc               string
				mode, flags, other uint64
				want               uint32
			}
			cases := []tc{
				{"0755", 0o755, oCreat, 0, allow},
				{"0644, other arguments full of set bits", 0o644, oCreat, 0xffffffff_fffff000 &^ createFlags, allow},
				{"sticky 01777", 0o1777, oCreat, 0, allow},
				{"S_ISUID 04755", 0o4755, oCreat, 0, eperm},
				{"S_ISGID 02755", 0o2755, oCreat, 0, eperm},
				{"both 06777", 0o6777, oCreat, 0, eperm},
				{"S_ISUID with a file type (mknod S_IFREG)", 0o100000 | 0o4755, oCreat, 0, eperm},
				{"S_ISGID with garbage in the high word", 0xdead0000_00000000 | 0o2755, oCreat, 0, eperm},
				{"S_ISUID only in the high word (the kernel never reads it)", 0o4000 << 32, oCreat, 0, allow},
			}
			if c.flags >= 0 {
				cases = append(cases,
					tc{"O_TMPFILE with S_ISGID", 0o2755, tmpfile[goarch] | oWronly, 0, eperm},
					tc{"O_CREAT|O_WRONLY|O_TRUNC with S_ISUID", 0o4644, oCreat | oWronly | oTrunc, 0, eperm},
					tc{"no O_CREAT: the mode register is garbage", 0o6777, oWronly | oTrunc, 0, allow},
					tc{"O_RDONLY with every mode bit", 0xffffffff, 0, 0, allow},
					tc{"O_CREAT only in the high word of flags", 0o4755, oCreat << 32, 0, allow},
					tc{"O_DIRECTORY alone is not O_TMPFILE", 0o4755, tmpfile[goarch] &^ 0x400000, 0, allow},
				)
			}
			for _, k := range cases {
				if got := runVM(t, goarch, call(k.mode, k.flags, k.other)); got != k.want {
					t.Errorf("%s %s %s: got %#x, want %#x", goarch, c.name, k.desc, got, k.want)
				}
			}
		}
		for _, n := range nosysCalls {
			if got := runVM(t, goarch, seccompData(nums[n], audit[goarch], 0, 0, 0, 0)); got != enosys {
				t.Errorf("%s %s: got %#x, want ENOSYS", goarch, n, got)
			}
		}
		// Calls the profile allows that set no mode, with S_ISUID in every
		// argument, pass.
		for _, n := range []string{"read", "write", "close", "fstat", "lseek"} {
			nr, ok := nums[n]
			if !ok {
				continue
			}
			if got := runVM(t, goarch, seccompData(nr, audit[goarch], 0o4755, 0o4755, 0o4755, 0o4755, 0o4755, 0o4755)); got != allow {
				t.Errorf("%s %s: got %#x, want allow", goarch, n, got)
			}
		}
	}
	// The other ABIs of the same machine never reach the mode checks.
	if got := runVM(t, "amd64", seccompData(0x40000000|90, auditAMD64, 0, 0o755)); got != eperm {
		t.Errorf("x32 chmod: got %#x, want EPERM", got)
	}
	if got := runVM(t, "amd64", seccompData(15, auditI386, 0, 0o4755)); got != kill {
		t.Errorf("i386 chmod: got %#x, want kill", got)
	}
	if got := runVM(t, "arm64", seccompData(15, auditARM, 0, 0o4755)); got != kill {
		t.Errorf("arm32 chmod: got %#x, want kill", got)
	}
}

// TestKeyringCalls: the keyring calls are refused on every arch, whatever
// their arguments (cco's rule, not only the profile's default).
func TestKeyringCalls(t *testing.T) {
	for goarch := range arches {
		for _, n := range keyringCalls {
			nr, ok := numbers(goarch)[n]
			if !ok {
				t.Fatalf("%s has no %s", goarch, n)
			}
			for _, a := range []uint64{0, 1, 0xfffffffd, 0xffffffff_fffffffd, 0x11} { // KEY_SPEC_SESSION_KEYRING, KEYCTL_READ
				if got := runVM(t, goarch, seccompData(nr, audit[goarch], a, a, a, a, a, a)); got != eperm {
					t.Errorf("%s %s(%#x...): got %#x, want EPERM", goarch, n, a, got)
				}
			}
		}
	}
}

// TestOldKernel: on a kernel older than the profile's newest minKernel the
// program is compiled at launch, and the profile's rules for that kernel
// hold: ptrace is refused before 4.8 (it could rewrite a call after the
// filter judged it).
func TestOldKernel(t *testing.T) {
	for goarch := range arches {
		for k, want := range map[Kernel]uint32{{4, 4}: eperm, programKernel: allow} {
			b, err := bytesFor(goarch, k)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Program(goarch, k)
			if err != nil {
				t.Fatal(err)
			}
			if compiled, _ := encode(p); !bytes.Equal(b, compiled) {
				t.Errorf("%s on %v: the program given is not the one compiled for that kernel", goarch, k)
			}
			var raw []bpf.RawInstruction
			for i := 0; i < len(b); i += 8 {
				raw = append(raw, bpf.RawInstruction{Op: binary.LittleEndian.Uint16(b[i:]), Jt: b[i+2], Jf: b[i+3], K: binary.LittleEndian.Uint32(b[i+4:])})
			}
			ins, _ := bpf.Disassemble(raw)
			v, err := bpf.NewVM(ins)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := v.Run(seccompData(numbers(goarch)["ptrace"], audit[goarch], 0x4206))
			if uint32(got) != want {
				t.Errorf("%s on %v: ptrace gets %#x, want %#x", goarch, k, got, want)
			}
		}
	}
}
