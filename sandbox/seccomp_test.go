package sandbox

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/bpf"

	"github.com/cco-dev/cco/internal/testenv"
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

func runVM(t *testing.T, goarch string, data []byte) uint32 {
	t.Helper()
	got, err := vmProgram(t, goarch).Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(got)
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
		if got := runVM(t, tc.goarch, seccompData(tc.nr, tc.arch, 0, tc.arg1)); got != tc.want {
			t.Errorf("%s: got %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

func TestSeccompUnknownArch(t *testing.T) {
	if _, err := SeccompProgram("riscv64"); err == nil {
		t.Fatal("riscv64 gave a program")
	}
}

// archFacts are one arch's syscall numbers and open flags as x/sys/unix
// states them, read from its generated sources, so that the table in
// seccomp.go is checked for both arches whatever machine runs the test.
type archFacts struct {
	nr    map[string]uint32
	flags map[string]uint32
}

func readArchFacts(t *testing.T, goarch string) archFacts {
	t.Helper()
	out, err := exec.Command(testenv.GoTool(), "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Fatalf("locating golang.org/x/sys: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "unix")
	parse := func(file, prefix string) map[string]uint32 {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]uint32{}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || !strings.HasPrefix(k, prefix) || strings.ContainsAny(k, " \t") {
				continue
			}
			n, err := strconv.ParseUint(v, 0, 32)
			if err == nil {
				m[strings.ToLower(strings.TrimPrefix(k, prefix))] = uint32(n)
			}
		}
		return m
	}
	f := archFacts{nr: parse("zsysnum_linux_"+goarch+".go", "SYS_"), flags: parse("zerrors_linux_"+goarch+".go", "O_")}
	if len(f.nr) < 100 || f.flags["creat"] == 0 {
		t.Fatalf("%s: x/sys/unix sources not as expected (%d syscalls)", goarch, len(f.nr))
	}
	return f
}

// TestSeccompTable checks every number the program uses against x/sys/unix,
// and that a call is left out only where the arch has no such call.
func TestSeccompTable(t *testing.T) {
	for goarch, a := range seccompArches {
		f := readArchFacts(t, goarch)
		names := []string{"ioctl"}
		for _, c := range modeCalls {
			names = append(names, c.name)
		}
		names = append(names, nosysCalls...)
		for _, n := range names {
			want, has := f.nr[n]
			got, ok := a.nr[n]
			if has != ok || got != want {
				t.Errorf("%s %s: table has %d (%v), x/sys/unix %d (%v)", goarch, n, got, ok, want, has)
			}
		}
		if len(a.nr) != len(names)-countMissing(f, names) {
			t.Errorf("%s: table has %d numbers, want only the %d calls the program judges", goarch, len(a.nr), len(names)-countMissing(f, names))
		}
		if got := f.flags["creat"] | (f.flags["tmpfile"] &^ f.flags["directory"]); got != createFlags {
			t.Errorf("%s: O_CREAT|__O_TMPFILE = %#x, the program uses %#x", goarch, got, uint32(createFlags))
		}
	}
}

func countMissing(f archFacts, names []string) int {
	n := 0
	for _, x := range names {
		if _, ok := f.nr[x]; !ok {
			n++
		}
	}
	return n
}

// TestSeccompModeBits runs every call that can set a mode, on each arch,
// with and without S_ISUID/S_ISGID, with the mode in its own argument and
// tempting bits in the others, so that a filter reading the wrong argument
// or the wrong word fails.
func TestSeccompModeBits(t *testing.T) {
	const allow, eperm, enosys = retAllow, retErrno | errEPERM, retErrno | errENOSYS
	audit := map[string]uint32{"amd64": 0xc000003e, "arm64": 0xc00000b7}
	tmpfile := map[string]uint64{"amd64": 0x410000, "arm64": 0x404000}
	const oCreat, oWronly, oTrunc = 0x40, 0x1, 0x200
	for goarch, a := range seccompArches {
		for _, c := range modeCalls {
			nr, ok := a.nr[c.name]
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
			if got := runVM(t, goarch, seccompData(a.nr[n], audit[goarch], 0, 0, 0, 0)); got != enosys {
				t.Errorf("%s %s: got %#x, want ENOSYS", goarch, n, got)
			}
		}
		// A call outside the lists, with S_ISUID in every argument, passes.
		for _, nr := range []uint32{0, 1, 3, 63, 64, 80} {
			judged := false
			for _, v := range a.nr {
				judged = judged || v == nr
			}
			if judged {
				continue
			}
			if got := runVM(t, goarch, seccompData(nr, audit[goarch], 0o4755, 0o4755, 0o4755, 0o4755, 0o4755, 0o4755)); got != allow {
				t.Errorf("%s nr %d: got %#x, want allow", goarch, nr, got)
			}
		}
	}
	// The other ABIs of the same machine never reach the mode checks.
	if got := runVM(t, "amd64", seccompData(0x40000000|90, 0xc000003e, 0, 0o755)); got != eperm {
		t.Errorf("x32 chmod: got %#x, want EPERM", got)
	}
	if got := runVM(t, "amd64", seccompData(15, 0x40000003, 0, 0o4755)); got != retKillProc {
		t.Errorf("i386 chmod: got %#x, want kill", got)
	}
	if got := runVM(t, "arm64", seccompData(15, 0x40000028, 0, 0o4755)); got != retKillProc {
		t.Errorf("arm32 chmod: got %#x, want kill", got)
	}
}
