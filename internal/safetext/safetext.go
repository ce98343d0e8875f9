// Package safetext is the one printer for text that a session could have
// chosen: paths, keys, values and file contents that the shadow or
// cco-install prints to the user's terminal. A terminal acts on some bytes
// (ESC and the other C0 controls, DEL, the C1 controls that 8-bit
// terminals read as CSI and OSC, bidi controls that reorder what is shown),
// so a name planted in a workspace could write the clipboard (OSC 52), set
// the window title, or make one path look like another. Escape shows each
// such byte as a Go escape instead, and keeps every printable character.
package safetext

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escape is s with every byte a terminal would act on escaped: C0
// controls (newline and tab too), DEL, C1 controls, invalid UTF-8, the
// bidi controls (U+202A-U+202E, U+2066-U+2069) and the Unicode line and
// paragraph separators. The result is one line of printable text.
func Escape(s string) string {
	if clean(s, false) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	write(&b, s, false)
	return b.String()
}

// Lines is Escape for text of several lines: newlines and tabs stay, every
// other byte a terminal would act on is escaped.
func Lines(s string) string {
	if clean(s, true) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	write(&b, s, true)
	return b.String()
}

// unsafe reports whether r, decoded from size bytes, must be escaped.
func unsafe(r rune, size int, lines bool) bool {
	switch {
	case r == utf8.RuneError && size == 1:
		return true
	case r == '\n' || r == '\t':
		return !lines
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

func clean(s string, lines bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if unsafe(r, size, lines) {
			return false
		}
		i += size
	}
	return true
}

func write(b *strings.Builder, s string, lines bool) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !unsafe(r, size, lines):
			b.WriteString(s[i : i+size])
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case r < 0x80:
			// \n, \t, \x1b: as a Go string literal would show them.
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(uEscape(r))
		}
		i += size
	}
}

// uEscape is r as a \u escape; every rune that is escaped is below U+10000.
func uEscape(r rune) string {
	h := strconv.FormatInt(int64(r), 16)
	return `\u` + strings.Repeat("0", 4-len(h)) + h
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}

// Writer escapes, as Lines does, everything written through it to w: a
// program whose every message goes through it prints no byte a terminal
// would act on, whatever a message quotes.
type Writer struct{ W io.Writer }

// Write writes p escaped; it reports len(p) written when the escaped
// text was.
func (s Writer) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.W, Lines(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Linef writes format, formatted with args, to w as one line: the text
// escaped as Escape does, then a newline. format is one line itself; a
// value in args cannot start another.
func Linef(w io.Writer, format string, args ...any) {
	io.WriteString(w, Escape(fmt.Sprintf(format, args...))+"\n")
}

// JSON is b with every character a terminal would act on written as a
// JSON \u escape: the C0 controls but newline and tab, DEL, the C1 and
// bidi controls and the line and paragraph separators, and invalid UTF-8
// as U+FFFD. encoding/json escapes the C0 controls and U+2028/2029 in its
// strings and leaves DEL, C1 and bidi raw; those can only stand inside a
// string, so JSON of a document encoding/json wrote is the same document.
func JSON(b []byte) []byte {
	if clean(string(b), true) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case !unsafe(r, size, true):
			out = append(out, b[i:i+size]...)
		default: // invalid UTF-8 decodes as U+FFFD
			out = append(out, uEscape(r)...)
		}
		i += size
	}
	return out
}
