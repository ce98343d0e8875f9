package main

import (
	"errors"
	"io"

	"github.com/cco-dev/cco/internal/safetext"
)

// printer is cco-install's stdout. Every byte goes through the one printer
// (internal/safetext): the text report as safetext.Lines, the --json
// document as safetext.JSON, which leaves it the same document. json is
// the --json switch, known once the command line is parsed.
type printer struct {
	w    io.Writer
	json *bool
}

func (p printer) Write(b []byte) (int, error) {
	if !*p.json {
		return safetext.Writer{W: p.w}.Write(b)
	}
	if _, err := p.w.Write(safetext.JSON(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// underlying is the stream under the one printer: to ask whether it is a
// terminal, never to print to.
func underlying(w any) any {
	switch p := w.(type) {
	case printer:
		return p.w
	case safetext.Writer:
		return p.W
	}
	return w
}

// linesError is an error of several lines, each value in it escaped
// (safetext.Escape) where it was made.
type linesError struct{ msg string }

func (e linesError) Error() string { return e.msg }

// errText is err as stderr shows it. Any other error is one line, and is
// escaped whole: it may quote a path in a home or a mirror's answer.
func errText(err error) string {
	var ue usageError
	var le linesError
	if errors.As(err, &ue) || errors.As(err, &le) {
		return err.Error()
	}
	return safetext.Escape(err.Error())
}
