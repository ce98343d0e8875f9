package vendorfetch

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"golang.org/x/net/http/httpproxy"
)

// NotFoundError is a 404 from a store: the version or asset does not exist
// there, which is not a network failure and is never retried.
type NotFoundError struct{ URL string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s does not exist (HTTP 404)", e.URL) }

// StatusError is any other unexpected HTTP status.
type StatusError struct {
	URL    string
	Status int
	// RetryAfter is the server's Retry-After (429, 503), or 0.
	RetryAfter time.Duration
}

// As lets the retry loop see the server's Retry-After.
func (e *StatusError) As(target any) bool {
	if ra, ok := target.(**backoff.RetryAfterError); ok && e.RetryAfter > 0 {
		*ra = &backoff.RetryAfterError{Duration: e.RetryAfter}
		return true
	}
	return false
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s answered HTTP %d %s", e.URL, e.Status, http.StatusText(e.Status))
}

// errPermanent marks failures that another attempt cannot fix.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// maxSmall caps documents read into memory (channels, manifests, sums).
const maxSmall = 1 << 20

// source is where releases come from: the network or an offline bundle.
type source interface {
	// small reads a small document whole.
	small(ctx context.Context, url string) ([]byte, error)
	// doc reads a document of at most limit bytes whole (a packument).
	doc(ctx context.Context, url string, limit int64) ([]byte, error)
	// download streams url into dst (positioned at its start) through h,
	// refusing more than limit bytes (limit < 0: no bound), and returns
	// the number of bytes written. A cut transfer (a short body, or a
	// chunked body without its last chunk) is an error and is resumed;
	// the caller checks the exact size and the checksum.
	download(ctx context.Context, url string, dst *os.File, h hash.Hash, limit int64) (int64, error)
}

// acceptKey carries the Accept header of a request in its context.
type acceptKey struct{}

// withAccept asks for one form of a document (an npm registry's abbreviated
// packument) where the server has several.
func withAccept(ctx context.Context, accept string) context.Context {
	return context.WithValue(ctx, acceptKey{}, accept)
}

// netSource fetches over HTTP(S) with retries, resume and a stall timeout.
type netSource struct {
	client   *http.Client
	retries  int
	backoff  time.Duration
	timeout  time.Duration
	budget   *retryBudget
	progress *progress
	// requests counts every request sent (tests and the report read it).
	requests atomic.Int64
}

func newNetSource(cfg Config) *netSource {
	c := cfg.HTTPClient
	if c == nil {
		// The default transport honours HTTPS_PROXY/NO_PROXY; no client
		// timeout, because a 250 MB body takes long: the watchdog below
		// bounds each stall instead.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = proxyFromEnv
		c = &http.Client{Transport: tr}
	}
	b := cfg.budget
	if b == nil {
		b = newRetryBudget(cfg.RetryBudget)
	}
	return &netSource{client: c, retries: cfg.Retries, backoff: cfg.Backoff, timeout: cfg.Timeout, budget: b,
		progress: newProgress(cfg.Log, cfg.Progress)}
}

// retryBudget is the time one run may spend waiting between attempts, over
// all its requests (download.retry_budget): a mirror that is down fails the
// run in seconds, not a minute per URL. Every wait is taken from it, a
// server's Retry-After too; once it is spent, a failure is final.
type retryBudget struct {
	mu    sync.Mutex
	total time.Duration
	left  time.Duration
}

func newRetryBudget(d time.Duration) *retryBudget {
	if d <= 0 {
		d = DefaultConfig().RetryBudget
	}
	return &retryBudget{total: d, left: d}
}

// remaining is what is left of the budget.
func (b *retryBudget) remaining() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.left
}

// spend takes a wait from the budget.
func (b *retryBudget) spend(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left = max(b.left-d, 0)
}

// budgetBackOff is the exponential backoff, each wait cut to what is left
// of the run's budget, and stopped once it is spent.
type budgetBackOff struct {
	*backoff.ExponentialBackOff
	budget *retryBudget
}

func (b budgetBackOff) NextBackOff() time.Duration {
	d := b.ExponentialBackOff.NextBackOff()
	left := b.budget.remaining()
	if d == backoff.Stop || left <= 0 {
		return backoff.Stop
	}
	return min(d, left)
}

// proxyFromEnv honours HTTPS_PROXY, HTTP_PROXY and NO_PROXY (either case)
// as they are when the request is made; net/http's own reads them once per
// process.
func proxyFromEnv(req *http.Request) (*url.URL, error) {
	return httpproxy.FromEnvironment().ProxyFunc()(req.URL)
}

// watchdog cancels a request when no progress was made for timeout: the
// connect, the response headers and every read of the body each restart it.
type watchdog struct {
	timer   *time.Timer
	timeout time.Duration
	fired   atomic.Bool
}

func newWatchdog(ctx context.Context, timeout time.Duration) (context.Context, *watchdog, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	w := &watchdog{timeout: timeout}
	w.timer = time.AfterFunc(timeout, func() { w.fired.Store(true); cancel() })
	return ctx, w, func() { w.timer.Stop(); cancel() }
}

func (w *watchdog) kick() { w.timer.Reset(w.timeout) }

func (w *watchdog) wrap(url string, err error) error {
	if err != nil && w.fired.Load() {
		return fmt.Errorf("%s: no data for %v (timeout)", url, w.timeout)
	}
	return err
}

type kickReader struct {
	r io.Reader
	w *watchdog
}

func (k kickReader) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	if n > 0 {
		k.w.kick()
	}
	return n, err
}

func (s *netSource) get(ctx context.Context, url string, offset int64) (*http.Response, *watchdog, context.CancelFunc, error) {
	ctx, wd, cancel := newWatchdog(ctx, s.timeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, nil, nil, permanentError{fmt.Errorf("request for %s: %w", url, err)}
	}
	req.Header.Set("User-Agent", "cco-install")
	if a, ok := ctx.Value(acceptKey{}).(string); ok {
		req.Header.Set("Accept", a)
	}
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	s.requests.Add(1)
	resp, err := s.client.Do(req)
	if err != nil {
		cancel()
		return nil, nil, nil, wd.wrap(url, err)
	}
	wd.kick()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		resp.Body.Close()
		cancel()
		return nil, nil, nil, permanentError{&NotFoundError{URL: url}}
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout:
		resp.Body.Close()
		cancel()
		return nil, nil, nil, &StatusError{URL: url, Status: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent:
		resp.Body.Close()
		cancel()
		return nil, nil, nil, permanentError{&StatusError{URL: url, Status: resp.StatusCode}}
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{kickReader{resp.Body, wd}, resp.Body}
	return resp, wd, cancel, nil
}

// Retry bounds: the wait between attempts grows from the configured backoff
// (doubling, with jitter) to maxInterval; a server's Retry-After is honoured
// up to maxRetryAfter; and all attempts at one URL end within maxElapsed.
var (
	maxInterval   = 30 * time.Second
	maxRetryAfter = 60 * time.Second
	maxElapsed    = 2 * time.Minute
)

// retry runs op until it succeeds, fails permanently, or the attempts or
// the run's retry budget are used up. A failure another attempt cannot fix
// is not retried: a local disk full, read-only or forbidden (ENOSPC, EROFS,
// EACCES), or a machine with no route or no DNS: offline, a run fails in
// seconds.
func (s *netSource) retry(ctx context.Context, url string, op func() error) error {
	exp := backoff.NewExponentialBackOff()
	exp.InitialInterval, exp.MaxInterval, exp.Multiplier, exp.RandomizationFactor = max(s.backoff, time.Millisecond), maxInterval, 2, 0.25
	attempts := 0
	spent := false // the budget, not the count of attempts, ended the retries
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		attempts++
		err := op()
		var perm permanentError
		switch {
		case err == nil:
			return struct{}{}, nil
		case errors.As(err, &perm):
			return struct{}{}, backoff.Permanent(perm.error)
		case isLocal(err), isOffline(err):
			return struct{}{}, backoff.Permanent(err)
		}
		var se *StatusError
		if errors.As(err, &se) && se.RetryAfter > maxRetryAfter {
			return struct{}{}, backoff.Permanent(fmt.Errorf("%w (the server asks to retry after %v: more than the %v cco waits)", err, se.RetryAfter, maxRetryAfter))
		}
		left := s.budget.remaining()
		spent = left <= 0
		switch {
		case attempts > s.retries, spent:
		case errors.As(err, &se) && se.RetryAfter > left:
			return struct{}{}, backoff.Permanent(fmt.Errorf("%w (the server asks to retry after %v: more than the %v left of the run's retry budget, download.retry_budget)", err, se.RetryAfter, left.Round(time.Millisecond)))
		}
		return struct{}{}, err
	}, backoff.WithBackOff(budgetBackOff{exp, s.budget}), backoff.WithMaxTries(uint(s.retries)+1), backoff.WithMaxElapsedTime(maxElapsed),
		backoff.WithNotify(func(err error, d time.Duration) {
			s.budget.spend(d)
			s.progress.logf("%s failed (%v); retrying in %v", url, err, d.Round(time.Millisecond))
		}))
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		if !errors.Is(err, ctx.Err()) {
			return fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return err
	case isLocal(err), isOffline(err):
		return err
	case spent && attempts == 1:
		return fmt.Errorf("%w (not retried: the run's retry budget of %v, download.retry_budget, is spent)", err, s.budget.total)
	case spent:
		return fmt.Errorf("%w (gave up after %d attempts: the run's retry budget of %v, download.retry_budget, is spent)", err, attempts, s.budget.total)
	case attempts == 1:
		return err
	}
	return fmt.Errorf("%w (gave up after %d attempts)", err, attempts)
}

// isLocal reports an error of this machine's own disk: another attempt
// would only fail the same way.
func isLocal(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.EROFS, syscall.EACCES, syscall.EDQUOT, syscall.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// isOffline reports a machine with no way to the server: no DNS answer or
// no route. (A refused connection or a timeout may pass: it is retried.)
func isOffline(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) && !dns.IsTimeout {
		return true
	}
	return errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH)
}

func (s *netSource) small(ctx context.Context, url string) ([]byte, error) {
	return s.doc(ctx, url, maxSmall)
}

func (s *netSource) doc(ctx context.Context, url string, limit int64) ([]byte, error) {
	var out []byte
	err := s.retry(ctx, url, func() error {
		resp, wd, cancel, err := s.get(ctx, url, 0)
		if err != nil {
			return err
		}
		defer cancel()
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return wd.wrap(url, err)
		}
		if int64(len(b)) > limit {
			return permanentError{fmt.Errorf("%s: larger than %d bytes; this is not a release document", url, limit)}
		}
		out = b
		return nil
	})
	return out, err
}

func (s *netSource) download(ctx context.Context, url string, dst *os.File, h hash.Hash, limit int64) (int64, error) {
	var written int64
	var bar *transfer
	var err error
	defer func() {
		if bar != nil {
			bar.done(err == nil)
		}
	}()
	err = s.retry(ctx, url, func() error {
		resp, wd, cancel, err := s.get(ctx, url, written)
		if err != nil {
			return err
		}
		defer cancel()
		defer resp.Body.Close()
		if bar == nil {
			// The bar's total is the body's size when the server says it
			// (limit may be only an upper bound).
			total := limit
			if resp.ContentLength > 0 {
				total = written + resp.ContentLength
			}
			bar = s.progress.start(url, total)
		}
		if resp.StatusCode == http.StatusPartialContent {
			if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != written {
				return permanentError{fmt.Errorf("%s: the server resumed at %q, not at byte %d", url, resp.Header.Get("Content-Range"), written)}
			}
		} else if written > 0 {
			// The server ignored the Range: start over from byte 0.
			if err := restart(dst, h); err != nil {
				return permanentError{err}
			}
			written = 0
			bar.set(0)
		}
		body := io.Reader(resp.Body)
		if limit >= 0 {
			body = io.LimitReader(resp.Body, limit-written+1)
		}
		n, err := io.CopyBuffer(io.MultiWriter(dst, h, bar), body, make([]byte, 256<<10))
		written += n
		if limit >= 0 && written > limit {
			return permanentError{fmt.Errorf("%s: more than the expected %d bytes (size mismatch, or larger than the unpack limit)", url, limit)}
		}
		if err != nil {
			return wd.wrap(url, fmt.Errorf("%s: transfer cut after %d bytes: %w", url, written, err))
		}
		return nil
	})
	return written, err
}

func restart(dst *os.File, h hash.Hash) error {
	if err := dst.Truncate(0); err != nil {
		return err
	}
	if _, err := dst.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h.Reset()
	return nil
}

// rangeStart parses the first byte of "bytes START-END/TOTAL".
func rangeStart(cr string) (int64, bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	a, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(a, 10, 64)
	return n, err == nil
}
