package vendorfetch

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/safetext"
)

// TestProgressThroughThePrinter: behind the one printer, the plain lines
// show a mirror's URL escaped, and a bar draws on the stream under it with
// its own control codes, showing the file name escaped.
func TestProgressThroughThePrinter(t *testing.T) {
	const url = "http://store/claude\x1b]0;pwned\x07\u202e"
	var b bytes.Buffer
	p := newProgress(safetext.Writer{W: &b}, "never")
	p.logf("%s failed (%v); retrying", url, "HTTP 503\n\x9b2J")
	if want := `http://store/claude\x1b]0;pwned\a\u202e failed (HTTP 503\n\x9b2J); retrying` + "\n"; b.String() != want {
		t.Errorf("logf wrote %q, want %q", b.String(), want)
	}
	b.Reset()
	tr := newProgress(safetext.Writer{W: &b}, "always").start(url, 1000)
	tr.Write(make([]byte, 500))
	tr.done(true)
	if !strings.Contains(b.String(), "\r") || !strings.Contains(b.String(), "50%") {
		t.Errorf("no bar was drawn under the printer: %q", b.String())
	}
	if !strings.Contains(b.String(), `claude\x1b]0;pwned\a\u202e`) || strings.Contains(b.String(), "\x1b]0") {
		t.Errorf("the bar did not show the file name escaped: %q", b.String())
	}
}
