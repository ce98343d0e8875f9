package seccomp

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/testenv"
)

// workloadEnv makes the test binary, as a child, run the workload.
const workloadEnv = "CCO_SECCOMP_WORKLOAD"

// otherEnv names a file with another program's bytes (an older build's,
// say), timed as a third side of BenchmarkFilterCost.
const otherEnv = "CCO_SECCOMP_OTHER"

// loadEnv makes the test binary, as a child, load the program in the
// file it names and print how long the kernel took.
const loadEnv = "CCO_SECCOMP_LOAD"

func TestMain(m *testing.M) {
	if n := os.Getenv(workloadEnv); n != "" {
		workload(n)
		return
	}
	if f := os.Getenv(loadEnv); f != "" {
		load(f)
		return
	}
	os.Exit(m.Run())
}

// load installs the program in file on this thread, as bwrap does, and
// prints the time the kernel took (it translates and compiles the program
// and works out which calls it may allow without running it).
func load(file string) {
	b, err := os.ReadFile(file)
	if err != nil || len(b)%8 != 0 {
		fmt.Println("bad program", err)
		return
	}
	prog := unix.SockFprog{Len: uint16(len(b) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&b[0]))}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("no_new_privs", err)
		return
	}
	start := time.Now()
	err = unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0)
	d := time.Since(start)
	if err != nil {
		fmt.Println("seccomp", err)
		return
	}
	fmt.Println(d.Nanoseconds())
}

// workload runs n rounds of system calls an agent's tools make all the
// time: stat, open and close, an ioctl, getppid. openat and ioctl are
// judged by their arguments on every call; the kernel caches the others'
// verdict. It prints the time per round, in ns.
func workload(n string) {
	rounds, _ := strconv.Atoi(n)
	var st unix.Stat_t
	start := time.Now()
	for range rounds {
		unix.Stat("/etc/hostname", &st)
		if fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			unix.IoctlGetTermios(fd, unix.TCGETS)
			unix.Close(fd)
		}
		unix.Getppid()
	}
	fmt.Println(time.Since(start).Nanoseconds() / int64(rounds))
}

// BenchmarkFilterCost times the workload in bwrap with the jail's seccomp
// program against the same bwrap without one (the baseline), interleaved
// in one run, and reports each side's time per round (median) and their
// ratio. With CCO_SECCOMP_OTHER set, that program is a third side.
func BenchmarkFilterCost(b *testing.B) {
	bwrap := testenv.RequireBwrap(b)
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	prog, err := Bytes()
	if err != nil {
		b.Fatal(err)
	}
	sides := []struct {
		name string
		prog []byte
	}{{"unfiltered", nil}, {"jail", prog}}
	if f := os.Getenv(otherEnv); f != "" {
		other, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		sides = append(sides, struct {
			name string
			prog []byte
		}{"other", other})
	}
	const rounds = 100000
	times := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		for _, s := range sides {
			args := []string{"--unshare-user-try", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"}
			c := exec.Command(bwrap)
			if s.prog != nil {
				r, w, err := os.Pipe()
				if err != nil {
					b.Fatal(err)
				}
				go func() { w.Write(s.prog); w.Close() }()
				c.ExtraFiles = []*os.File{r}
				args = append(args, "--seccomp", "3")
				defer r.Close()
			}
			c.Args = append(append([]string{bwrap}, args...), "--", exe)
			c.Env = []string{workloadEnv + "=" + strconv.Itoa(rounds)}
			out, err := c.Output()
			if err != nil {
				b.Fatalf("%s: %v", s.name, err)
			}
			ns, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
			if err != nil {
				b.Fatalf("%s: %q", s.name, out)
			}
			times[s.name] = append(times[s.name], ns)
		}
	}
	for _, s := range sides {
		b.ReportMetric(median(times[s.name]), s.name+"-ns/round")
	}
	b.ReportMetric(median(times["jail"])/median(times["unfiltered"]), "jail/unfiltered")
	if _, ok := times["other"]; ok {
		b.ReportMetric(median(times["jail"])/median(times["other"]), "jail/other")
	}
}

// BenchmarkFilterLoad times the kernel's loading of the jail's program
// (bwrap loads it twice a launch: in the jail's pid 1 and in the agent's
// process) against a one-instruction program that allows everything, or,
// with CCO_SECCOMP_OTHER set, against that program; interleaved, medians.
func BenchmarkFilterLoad(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	prog, err := Bytes()
	if err != nil {
		b.Fatal(err)
	}
	baseline, err := encode([]bpf.Instruction{bpf.RetConstant{Val: retAllow}})
	if err != nil {
		b.Fatal(err)
	}
	if f := os.Getenv(otherEnv); f != "" {
		if baseline, err = os.ReadFile(f); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	files := map[string][]byte{"jail": prog, "baseline": baseline}
	for name, p := range files {
		if err := os.WriteFile(dir+"/"+name, p, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	times := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		for _, name := range []string{"baseline", "jail"} {
			c := exec.Command(exe)
			c.Env = []string{loadEnv + "=" + dir + "/" + name}
			out, err := c.Output()
			ns, perr := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
			if err != nil || perr != nil {
				b.Fatalf("%s: %v %q", name, err, out)
			}
			times[name] = append(times[name], ns)
		}
	}
	for _, name := range []string{"baseline", "jail"} {
		b.ReportMetric(median(times[name]), name+"-load-ns")
	}
	b.ReportMetric(median(times["jail"])/median(times["baseline"]), "jail/baseline")
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
