package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"testing"

	"github.com/cco-dev/cco/internal/docscheck"
)

// TestDocsFlags: the reference's mkpkg table lists exactly the flags -h
// prints.
func TestDocsFlags(t *testing.T) {
	var usage bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, io.Discard, &usage); code != 0 {
		t.Fatalf("mkpkg -h: exit %d\n%s", code, usage.String())
	}
	var code []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(usage.String(), -1) {
		code = append(code, "--"+m[1])
	}
	tb := docscheck.TableOf(t, "docs/reference/packages.md", "mkpkg")
	var doc []string
	for _, n := range tb.Names(tb.Col(t, "flag")) {
		if m := regexp.MustCompile(`^--[a-z-]+`).FindString(n); m != "" {
			doc = append(doc, m)
		}
	}
	if msg := docscheck.Diff(tb, "flag", doc, code); msg != "" {
		t.Error(msg)
	}
}
