package provision

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// The text report shows a long list once, shortened; JSON keeps it whole.
func TestTextReportShortensLongLists(t *testing.T) {
	var parts []string
	for i := 0; i < 40; i++ {
		parts = append(parts, fmt.Sprintf("removed /usr/libexec/cco/codex-dist/0.1/f%d", i))
	}
	rep := &Report{}
	rep.add(StepReport{ID: "uninstall.vendor.codex", Status: StatusChanged, Detail: strings.Join(parts, "; ")})
	var text, js bytes.Buffer
	rep.WriteText(&text)
	rep.WriteJSON(&js)
	if !strings.Contains(text.String(), "f3; ... and 36 more (--json lists them all)") || strings.Contains(text.String(), "f4;") {
		t.Errorf("text report:\n%s", text.String())
	}
	if !strings.Contains(js.String(), "f39") {
		t.Errorf("the JSON report lost the list")
	}
	if n := strings.Count(text.String(), "\n"); n != 2 {
		t.Errorf("want one line for the step and one summary, got %d lines:\n%s", n, text.String())
	}
}

// A binary file's diff is one line, with no ---/+++ headers.
func TestBinaryDiffHasNoHeaders(t *testing.T) {
	r := newRoot(t)
	f := &File{StepID: "x", Path: "/usr/local/bin/x", Mode: 0o755, UID: -1, GID: -1, Content: []byte("\x7fELF\x00\x01")}
	run := newRun(t, r)
	run.Diff = true
	c, err := f.Check(run.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.Diff, "---") || strings.Contains(c.Diff, "+++") || !strings.Contains(c.Diff, "a binary file, its diff is not shown") {
		t.Errorf("diff of a binary: %q", c.Diff)
	}
}
