package vendorfetch

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/testenv"
)

// dialer is an injected dial function that records every attempt and
// either fails with err or connects to addr (a local test server).
type dialer struct {
	attempts atomic.Int64
	err      error
	addr     string
}

func (d *dialer) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		d.attempts.Add(1)
		if d.err != nil {
			return nil, d.err
		}
		var nd net.Dialer
		return nd.DialContext(ctx, network, d.addr)
	}}}
}

func retrySource(c *http.Client, retries int, backoff time.Duration) *netSource {
	return newNetSource(Config{HTTPClient: c, Retries: retries, Backoff: backoff, Timeout: 10 * time.Second, Progress: "never", Log: io.Discard})
}

// Offline (no DNS, no route) a request fails at once: one attempt, no
// backoff, whatever download.retries says.
func TestOfflineIsNotRetried(t *testing.T) {
	for name, err := range map[string]error{
		"no DNS":   &net.DNSError{Err: "no such host", Name: "downloads.claude.ai", IsNotFound: true},
		"no route": &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)},
	} {
		t.Run(name, func(t *testing.T) {
			d := &dialer{err: err}
			start := time.Now()
			_, got := retrySource(d.client(), 4, time.Second).small(t.Context(), "https://downloads.claude.ai/claude-code-releases/stable")
			if got == nil || !errors.Is(got, err) && !strings.Contains(got.Error(), err.Error()) {
				t.Fatalf("err = %v, want %v", got, err)
			}
			if n := d.attempts.Load(); n != 1 {
				t.Errorf("%d dial attempts, want 1", n)
			}
			if el := time.Since(start); el > 500*time.Millisecond {
				t.Errorf("took %v offline, want no backoff at all", el)
			}
		})
	}
}

// A 503 with Retry-After waits what the server asks, not the backoff.
func TestRetryAfterIsHonoured(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "2.1.300\n")
	}))
	defer srv.Close()
	d := &dialer{addr: srv.Listener.Addr().String()}
	start := time.Now()
	// A backoff of 20s: only Retry-After can make the retry come after 1s.
	b, err := retrySource(d.client(), 3, 20*time.Second).small(t.Context(), "http://store.test/stable")
	if err != nil || string(b) != "2.1.300\n" {
		t.Fatalf("small = %q, %v", b, err)
	}
	if el := time.Since(start); el < time.Second || el > 5*time.Second {
		t.Errorf("the retry came after %v, want Retry-After's 1s", el)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// A Retry-After longer than cco waits is a clear failure at once.
func TestRetryAfterBeyondTheCap(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	d := &dialer{addr: srv.Listener.Addr().String()}
	start := time.Now()
	_, err := retrySource(d.client(), 4, time.Second).small(t.Context(), "http://store.test/stable")
	if err == nil || !strings.Contains(err.Error(), "retry after 1h0m0s") {
		t.Fatalf("err = %v, want the server's hour named", err)
	}
	if time.Since(start) > time.Second || d.attempts.Load() != 1 {
		t.Errorf("took %v and %d attempts, want one at once", time.Since(start), d.attempts.Load())
	}
}

// A full local disk is not retried: a tmpfs of 64 KiB takes part of a 1 MiB
// download, and the one request ends with ENOSPC.
func TestFullDiskIsNotRetried(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		testenv.Missing(t, "mounting a tmpfs: "+err.Error())
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	var requests atomic.Int64
	body := strings.Repeat("x", 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.WriteString(w, body)
	}))
	defer srv.Close()
	f, err := os.Create(filepath.Join(dir, "claude.partial"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := &dialer{addr: srv.Listener.Addr().String()}
	start := time.Now()
	_, err = retrySource(d.client(), 4, time.Second).download(t.Context(), "http://store.test/claude", f, sha256.New(), -1)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v, want ENOSPC", err)
	}
	if n := requests.Load(); n != 1 || time.Since(start) > time.Second {
		t.Errorf("%d requests in %v, want 1 at once", n, time.Since(start))
	}
}

// A down mirror (every connection refused, or every answer a 503) fails a
// whole run within its retry budget: with the default settings, the waits
// over every URL of the run add up to about 10 s, a Retry-After included,
// and the URLs after the budget is spent are tried once.
func TestRetryBudgetBoundsTheRun(t *testing.T) {
	d := DefaultConfig()
	if d.RetryBudget != 10*time.Second {
		t.Fatalf("the default retry budget is %v, want 10s", d.RetryBudget)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	var answered atomic.Int64
	srv503 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answered.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv503.Close()
	refusing := &dialer{err: refused}
	for name, tc := range map[string]struct {
		budget time.Duration
		dial   *dialer
		count  *atomic.Int64 // attempts: dials refused, or requests answered
	}{
		// The default budget with the default retries and backoff: the
		// run's own numbers.
		"refused, the defaults": {0, refusing, &refusing.attempts},
		"503":                   {time.Second, &dialer{addr: srv503.Listener.Addr().String()}, &answered},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.HTTPClient, cfg.Progress, cfg.Log = tc.dial.client(), "never", io.Discard
			if tc.budget > 0 {
				cfg.RetryBudget, cfg.Backoff = tc.budget, 100*time.Millisecond
			}
			cfg = cfg.withDefaults()
			want := cfg.RetryBudget
			start := time.Now()
			var attempts []int64
			var last error
			// Three URLs, each from a source of its own, as the steps of
			// one run make them: they share the run's budget.
			for _, u := range []string{"http://mirror.test/claude/stable", "http://mirror.test/codex/channels/latest", "http://mirror.test/codex/SHA256SUMS"} {
				before := tc.count.Load()
				_, last = newNetSource(cfg).small(t.Context(), u)
				if last == nil {
					t.Fatalf("%s: no error from a down mirror", u)
				}
				attempts = append(attempts, tc.count.Load()-before)
			}
			el := time.Since(start)
			if el > want+2*time.Second || el < want*3/4 {
				t.Errorf("the run took %v, want its budget of %v (waits add up to it, no more)", el, want)
			}
			if attempts[0] < 2 || attempts[1] != 1 || attempts[2] != 1 {
				t.Errorf("attempts per URL %v: want retries for the first, one attempt each once the budget is spent", attempts)
			}
			if !strings.Contains(last.Error(), "not retried: the run's retry budget of "+want.String()+", download.retry_budget, is spent") {
				t.Errorf("the last failure does not name the spent budget: %v", last)
			}
		})
	}
}

// A Retry-After within what is left of the budget is waited for; one
// beyond it fails at once, naming both.
func TestRetryAfterWithinTheBudget(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	d := &dialer{addr: srv.Listener.Addr().String()}
	cfg := Config{HTTPClient: d.client(), Retries: 4, Backoff: time.Millisecond, Timeout: 10 * time.Second, Progress: "never", Log: io.Discard, RetryBudget: 3 * time.Second}.withDefaults()
	start := time.Now()
	_, err := newNetSource(cfg).small(t.Context(), "http://mirror.test/stable")
	if el := time.Since(start); el < 2*time.Second || el > 4*time.Second {
		t.Errorf("took %v: want one wait of Retry-After's 2s, then no more", el)
	}
	if requests.Load() != 2 || err == nil || !strings.Contains(err.Error(), "the server asks to retry after 2s: more than the 1s left of the run's retry budget") {
		t.Errorf("%d requests, err %v: want 2, and the second Retry-After refused against the 1s left", requests.Load(), err)
	}
}
