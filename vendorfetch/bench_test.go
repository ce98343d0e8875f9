package vendorfetch

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/vendorfetch/extract"
)

// The benchmarks compare, side by side in one run, this package's work
// against the tools an operator would otherwise use, each done by a child
// process so that its peak RSS can be read from rusage:
//
//	go test -run XXX -bench . -benchtime 3x ./vendorfetch/
//
// They report the ratio (cco time / baseline time) and both peak RSS.

const benchSize = 250 << 20

// childEnv selects the helper mode of the test binary.
const childEnv = "VENDORFETCH_BENCH_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		if err := benchChild(mode, os.Args[len(os.Args)-3:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// benchChild does one unit of work: "download URL SHA256 OUT" or
// "unpack ARCHIVE DIR -".
func benchChild(mode string, args []string) error {
	switch mode {
	case "download":
		url, want, out := args[0], args[1], args[2]
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg := DefaultConfig()
		src := newNetSource(cfg.withDefaults())
		h := sha256.New()
		if _, err := src.download(context.Background(), url, f, h, benchSize); err != nil {
			return err
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			return fmt.Errorf("sha256 %s, want %s", got, want)
		}
		return f.Sync()
	case "unpack":
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		d, err := os.Open(args[1])
		if err != nil {
			return err
		}
		defer d.Close()
		_, err = extract.Extract(f, d, 0)
		return err
	}
	return fmt.Errorf("unknown child mode %q", mode)
}

// runChild runs cmd and returns its wall time and peak RSS in MiB. The
// peak is the child's VmHWM, polled from /proc: rusage's maxrss would
// include the parent's RSS, which a vfork'd child carries until its exec.
func runChild(b *testing.B, cmd *exec.Cmd) (time.Duration, float64) {
	b.Helper()
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatalf("%v: %v", cmd.Args, err)
	}
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	done := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var hwm int64
		for {
			if st, err := os.ReadFile(status); err == nil {
				for _, l := range strings.Split(string(st), "\n") {
					if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
						kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
						hwm = max(hwm, kb)
					}
				}
			}
			select {
			case <-done:
				peak <- hwm
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	// Reap only after the poller's last look: wait for the exit without
	// reaping (WNOWAIT), so /proc/PID stays readable until then.
	var info unix.Siginfo
	unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	d := time.Since(start)
	close(done)
	hwm := <-peak
	if err := cmd.Wait(); err != nil {
		b.Fatalf("%v: %v", cmd.Args, err)
	}
	return d, float64(hwm) / 1024
}

func self(b *testing.B, mode string, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"-test.run=XXX"}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	return cmd
}

// benchData writes n bytes that compress about like an executable (half
// random, half repetitive).
func benchData(w io.Writer, n int64, seed uint64) error {
	r := rand.New(rand.NewChaCha8([32]byte{byte(seed)}))
	buf := make([]byte, 64<<10)
	for n > 0 {
		for i := 0; i < len(buf)/2; i += 8 {
			v := r.Uint64()
			for j := 0; j < 8; j++ {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		for i := len(buf) / 2; i < len(buf); i++ {
			buf[i] = byte(i % 61)
		}
		k := min(n, int64(len(buf)))
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

func BenchmarkDownloadVerify(b *testing.B) {
	if _, err := exec.LookPath("curl"); err != nil {
		b.Skip("curl is not installed: no baseline")
	}
	dir := b.TempDir()
	art := filepath.Join(dir, "claude")
	f, _ := os.Create(art)
	h := sha256.New()
	if err := benchData(io.MultiWriter(f, h), benchSize, 1); err != nil {
		b.Fatal(err)
	}
	f.Close()
	want := hex.EncodeToString(h.Sum(nil))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, art) }))
	defer srv.Close()
	var cco, base time.Duration
	var ccoRSS, baseRSS float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := filepath.Join(dir, "out"+strconv.Itoa(i))
		d, rss := runChild(b, self(b, "download", srv.URL+"/claude", want, out))
		cco += d
		ccoRSS = max(ccoRSS, rss)
		os.Remove(out)
		d, rss = runChild(b, exec.Command("curl", "-sf", "-o", out, srv.URL+"/claude"))
		d2, rss2 := runChild(b, exec.Command("sha256sum", out))
		base += d + d2
		baseRSS = max(baseRSS, rss, rss2)
		os.Remove(out)
	}
	b.ReportMetric(float64(cco)/float64(base), "ratio")
	b.ReportMetric(cco.Seconds()/float64(b.N), "cco-s/op")
	b.ReportMetric(base.Seconds()/float64(b.N), "curl+sha256sum-s/op")
	b.ReportMetric(ccoRSS, "cco-peak-RSS-MiB")
	b.ReportMetric(baseRSS, "baseline-peak-RSS-MiB")
}

// codexShaped writes a tar.gz laid out like a Codex package of about
// benchSize bytes unpacked.
func codexShaped(b *testing.B, out string) {
	f, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	gw, _ := gzip.NewWriterLevel(bw, gzip.DefaultCompression)
	tw := tar.NewWriter(gw)
	files := []struct {
		name string
		size int64
	}{
		{"codex-package.json", 200},
		{"bin/codex", benchSize - 20<<20},
		{"bin/codex-code-mode-host", 8 << 20},
		{"codex-path/rg", 6 << 20},
		{"codex-resources/bwrap", 1 << 20},
		{"codex-resources/voice/libvoice.so", 5 << 20},
	}
	for i, fl := range files {
		tw.WriteHeader(&tar.Header{Name: "./" + fl.name, Size: fl.size, Mode: 0o755, Uid: 1001, Gid: 1001, Typeflag: tar.TypeReg})
		if err := benchData(tw, fl.size, uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
	tw.Close()
	gw.Close()
	bw.Flush()
}

func BenchmarkUnpackCodex(b *testing.B) {
	dir := b.TempDir()
	arch := filepath.Join(dir, "codex-package.tar.gz")
	codexShaped(b, arch)
	var cco, base time.Duration
	var ccoRSS, baseRSS float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := filepath.Join(dir, "x"+strconv.Itoa(i))
		os.Mkdir(out, 0o755)
		d, rss := runChild(b, self(b, "unpack", arch, out, "-"))
		cco += d
		ccoRSS = max(ccoRSS, rss)
		os.RemoveAll(out)
		os.Mkdir(out, 0o755)
		d, rss = runChild(b, exec.Command("tar", "-xzf", arch, "-C", out))
		base += d
		baseRSS = max(baseRSS, rss)
		os.RemoveAll(out)
	}
	b.ReportMetric(float64(cco)/float64(base), "ratio")
	b.ReportMetric(cco.Seconds()/float64(b.N), "cco-s/op")
	b.ReportMetric(base.Seconds()/float64(b.N), "tar-xzf-s/op")
	b.ReportMetric(ccoRSS, "cco-peak-RSS-MiB")
	b.ReportMetric(baseRSS, "baseline-peak-RSS-MiB")
}
