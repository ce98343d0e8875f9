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

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/testenv"
)

// workloadEnv makes the test binary, as a child, run the workload.
const workloadEnv = "CCO_SECCOMP_WORKLOAD"

// otherEnv names a file with another program's bytes (an older build's,
// say), timed as a third side of BenchmarkFilterCost.
const otherEnv = "CCO_SECCOMP_OTHER"

func TestMain(m *testing.M) {
	if n := os.Getenv(workloadEnv); n != "" {
		workload(n)
		return
	}
	os.Exit(m.Run())
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
	median := func(v []float64) float64 {
		v = slices.Clone(v)
		slices.Sort(v)
		return v[len(v)/2]
	}
	for _, s := range sides {
		b.ReportMetric(median(times[s.name]), s.name+"-ns/round")
	}
	b.ReportMetric(median(times["jail"])/median(times["unfiltered"]), "jail/unfiltered")
	if _, ok := times["other"]; ok {
		b.ReportMetric(median(times["jail"])/median(times["other"]), "jail/other")
	}
}

// BenchmarkBytes is the program's cost at each launch: the profile read
// and compiled, against assembling a fixed program of the same length.
func BenchmarkBytes(b *testing.B) {
	k := Kernel{6, 8}
	p, err := Program("amd64", k)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("compile", func(b *testing.B) {
		for range b.N {
			if _, err := bytesFor("amd64", k); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compile-baseline", func(b *testing.B) {
		for range b.N {
			if _, err := encode(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
