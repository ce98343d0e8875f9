package rcfile

import (
	"os"
	"strings"
	"testing"
)

// FuzzFind checks the block finder on any rc text:
//   - blocks are in order, apart, and inside the text;
//   - every line that puts ~/.local/bin first is inside a block, and a
//     block's Line is such a line;
//   - only Codex's marked blocks and Claude's commented ones are removable,
//     and each starts (and a Codex block ends) with its vendor's mark;
//   - Remove drops exactly the removable blocks' lines and keeps the rest,
//     byte for byte and in order.
func FuzzFind(f *testing.F) {
	stock, err := os.ReadFile("testdata/debian-skel-profile")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(stock))
	f.Add(CodexBegin + "\nexport PATH=\"$HOME/.local/bin:$PATH\"\n" + CodexEnd + "\n")
	f.Add("# Added by Claude Code\nexport PATH=\"$HOME/.local/bin:$PATH\"\n")
	f.Add(CodexBegin + "\n" + CodexBegin + "\n" + CodexEnd + "\n# claude\nfish_add_path ~/.local/bin\n")
	f.Add("PATH=$PATH:~/.local/bin\nset -gx PATH ~/.local/bin $PATH\npath=(~/.local/bin $path)\n")
	f.Fuzz(func(t *testing.T, text string) {
		lines := strings.Split(text, "\n")
		blocks := Find([]byte(text))
		in := make([]int, len(lines)) // 1 + the index of the block holding each line, or 0
		prev := 0
		for k, b := range blocks {
			if b.From <= prev || b.To < b.From || b.To > len(lines) {
				t.Fatalf("block %+v: out of order, overlapping or outside the %d lines", b, len(lines))
			}
			prev = b.To
			for n := b.From; n <= b.To; n++ {
				in[n-1] = k + 1
			}
			if b.Line != 0 && (b.Line < b.From || b.Line > b.To || !Prepends(lines[b.Line-1])) {
				t.Fatalf("block %+v: line %d is not one of its lines that puts ~/.local/bin first", b, b.Line)
			}
			first, last := strings.TrimSpace(lines[b.From-1]), strings.TrimSpace(lines[b.To-1])
			switch b.Vendor {
			case Codex:
				if first != CodexBegin || last != CodexEnd || !b.Removable {
					t.Fatalf("Codex block %+v: %q ... %q", b, first, last)
				}
			case Claude:
				if !strings.HasPrefix(first, "#") || !strings.Contains(strings.ToLower(first), "claude") || !b.Removable {
					t.Fatalf("Claude block %+v starts with %q", b, first)
				}
			default:
				if b.Removable {
					t.Fatalf("block %+v of %s is removable", b, b.Vendor)
				}
			}
		}
		for i, l := range lines {
			if Prepends(l) && in[i] == 0 {
				t.Fatalf("line %d %q puts ~/.local/bin first, yet is in no block of %+v", i+1, l, blocks)
			}
		}
		var kept []string
		for i, l := range lines {
			if in[i] == 0 || !blocks[in[i]-1].Removable {
				kept = append(kept, l)
			}
		}
		if got := string(Remove([]byte(text), blocks)); got != strings.Join(kept, "\n") {
			t.Fatalf("Remove(%q) = %q, want %q", text, got, strings.Join(kept, "\n"))
		}
	})
}
