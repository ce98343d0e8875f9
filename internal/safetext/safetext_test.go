package safetext

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"/home/ada/src/proj":                 "/home/ada/src/proj",
		"caf\u00e9 \u65e5\u672c":             "caf\u00e9 \u65e5\u672c",
		"\x1b]52;c;ZXZpbA==\x07":             `\x1b]52;c;ZXZpbA==\a`,
		"\x1b]0;title\x1b\\":                 `\x1b]0;title\x1b\`,
		"a\nb\tc\rd":                         `a\nb\tc\rd`,
		"\x7f":                               `\x7f`,
		"x\xc2\x9by":                         `x\u009by`, // C1 CSI, as UTF-8
		"x\x9b31m\x9d0;t\x07":                `x\x9b31m\x9d0;t\a`,
		"evil\u202egnp.exe":                  `evil\u202egnp.exe`,
		"a\u2066b\u2069c\u2028d":             `a\u2066b\u2069c\u2028d`,
		"\xff\xfe":                           `\xff\xfe`,
		"[color \"\x1b[31mred\"]":            `[color "\x1b[31mred"]`,
		"tab\there":                          `tab\there`,
		"ok \\x1b stays a backslash and x1b": "ok \\x1b stays a backslash and x1b",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Lines("one\n\ttwo\x1b[2J\n"); got != "one\n\ttwo\\x1b[2J\n" {
		t.Errorf("Lines kept or lost the wrong bytes: %q", got)
	}
}

// FuzzEscape: whatever the input, the output is valid UTF-8 with no byte
// below 0x20, no DEL, no C1 control and no bidi control, every printable
// input character survives, and a clean input is returned as it is.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]52;c;x\x07", "\x9b\x9d", "\u202e", "\xff", "a\nb", "\u00e9\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, lines := range []bool{false, true} {
			out := Escape(s)
			if lines {
				out = Lines(s)
			}
			if !utf8.ValidString(out) {
				t.Fatalf("%q: output %q is not valid UTF-8", s, out)
			}
			for _, r := range out {
				if r < 0x20 && !(lines && (r == '\n' || r == '\t')) || r == 0x7f || r >= 0x80 && r <= 0x9f ||
					r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x2028 || r == 0x2029 {
					t.Fatalf("%q (lines %v): output %q holds %U", s, lines, out, r)
				}
			}
			for _, r := range s {
				if r > 0x20 && r < 0x7f && !strings.ContainsRune(out, r) {
					t.Fatalf("%q: printable %q lost in %q", s, r, out)
				}
			}
			if clean(s, lines) && out != s {
				t.Fatalf("%q: a clean input changed to %q", s, out)
			}
		}
	})
}

func TestLinef(t *testing.T) {
	var b strings.Builder
	Linef(&b, "%-8s %s: %d", "drift", "/home/ada/x\n\x1b]0;pwned\x07", 3)
	if want := "drift    /home/ada/x\\n\\x1b]0;pwned\\a: 3\n"; b.String() != want {
		t.Errorf("Linef wrote %q, want %q", b.String(), want)
	}
}

// TestJSON: a document encoding/json wrote loses, under JSON, every raw
// character a terminal acts on, and still decodes to the same values.
func TestJSON(t *testing.T) {
	in := map[string]string{"path\x9b": "x\x1b]52;c;ZXZpbA==\x07\u009d0;t\u202e\u2066\x7f\xff\n"}
	raw, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out := JSON(raw)
	for _, r := range string(out) {
		if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			t.Fatalf("JSON left %U raw in %s", r, out)
		}
	}
	var back, want map[string]string
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("JSON broke the document %s: %v", out, err)
	}
	json.Unmarshal(raw, &want)
	if !reflect.DeepEqual(back, want) {
		t.Errorf("JSON changed the values: %q, want %q", back, want)
	}
	if got := JSON([]byte("not json\x1b[2J\x9b")); string(got) != `not json\u001b[2J\ufffd` {
		t.Errorf("JSON of raw text: %q", got)
	}
}

// FuzzJSON: whatever a string holds, the JSON encoding/json makes of it
// holds, under JSON, no byte a terminal acts on and decodes to the same
// string.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]52;c;x\x07", "\x9b\x9d", "\u009b", "\u202e", "\xff", "a\nb\x7f", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		raw, _ := json.Marshal(map[string]string{s: s})
		out := JSON(raw)
		if !utf8.Valid(out) {
			t.Fatalf("%q: %q is not valid UTF-8", s, out)
		}
		for _, r := range string(out) {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x2028 || r == 0x2029 {
				t.Fatalf("%q: %q holds %U", s, out, r)
			}
		}
		var back, want map[string]string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, out, err)
		}
		json.Unmarshal(raw, &want)
		if !reflect.DeepEqual(back, want) {
			t.Fatalf("%q: decodes to %q, want %q", s, back, want)
		}
	})
}
