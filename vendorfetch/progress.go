package vendorfetch

import (
	"io"
	"os"
	"path"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/cco-dev/cco/internal/safetext"
)

// progressInterval is how often a plain progress line is written when the
// log is not a terminal (image builds, CI logs). A test seam.
var progressInterval = 5 * time.Second

// progress draws a bar on a terminal and plain lines elsewhere.
type progress struct {
	w    io.Writer
	barW io.Writer // w, or the terminal under it for the bar
	bar  bool
}

func newProgress(w io.Writer, mode string) *progress {
	if w == nil {
		w = io.Discard
	}
	p := &progress{w: w, barW: w}
	// The bar draws with control codes of its own, which the one printer
	// would escape: it writes to the terminal under it, and the one value
	// it shows, a file name from a mirror, is escaped.
	if sw, ok := w.(safetext.Writer); ok {
		p.barW = sw.W
	}
	switch mode {
	case "always":
		p.bar = true
	case "never":
	default:
		if f, ok := p.barW.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			p.bar = true
		}
	}
	return p
}

// logf writes one line through the one printer: URLs and errors come
// from a mirror.
func (p *progress) logf(format string, args ...any) {
	safetext.Linef(p.w, format, args...)
}

// transfer is one download's progress; it is an io.Writer fed the bytes.
type transfer struct {
	p     *progress
	name  string
	total int64
	mu    sync.Mutex
	n     int64
	last  time.Time
	bar   *progressbar.ProgressBar
}

func (p *progress) start(url string, total int64) *transfer {
	t := &transfer{p: p, name: safetext.Escape(path.Base(url)), total: total, last: time.Now()}
	if p.bar {
		t.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(p.barW),
			progressbar.OptionSetDescription("downloading "+t.name),
			progressbar.OptionShowBytes(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
	} else {
		p.logf("downloading %s", url)
	}
	return t
}

func (t *transfer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n += int64(len(b))
	if t.bar != nil {
		t.bar.Add(len(b))
		return len(b), nil
	}
	if now := time.Now(); now.Sub(t.last) >= progressInterval {
		t.last = now
		if t.total > 0 {
			t.p.logf("downloading %s: %d of %d MB (%d%%)", t.name, t.n>>20, t.total>>20, t.n*100/t.total)
		} else {
			t.p.logf("downloading %s: %d MB", t.name, t.n>>20)
		}
	}
	return len(b), nil
}

func (t *transfer) set(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n = n
	if t.bar != nil {
		t.bar.Set64(n)
	}
}

// done ends the bar's line: a finished transfer clears it, a cut one (an
// error, ^C) clears it too, so the next line (the error, "interrupted")
// starts at the left margin, never after a half-drawn bar.
func (t *transfer) done(ok bool) {
	if t.bar == nil {
		return
	}
	if ok {
		t.bar.Finish()
		return
	}
	t.bar.Clear()
	t.bar.Exit()
}
