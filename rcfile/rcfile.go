// Package rcfile finds the lines of a shell start-up file that put
// ~/.local/bin ahead of the rest of PATH. The take-over reports and removes
// the vendors' blocks it finds; status names the files that explain why a
// vendor's agent in ~/.local/bin wins over the shadow. Both ask this parser,
// so they cannot disagree about a file.
package rcfile

import (
	"regexp"
	"strings"

	"github.com/cco-dev/cco/agent"
)

// Files are the shell start-up files the vendors' installers append their
// PATH blocks to, relative to a home.
var Files = []string{".bashrc", ".bash_profile", ".profile", ".zshrc", ".zprofile", ".zshenv", ".config/fish/config.fish"}

// The Codex installer's markers around its PATH block.
const (
	CodexBegin = "# >>> Codex installer >>>"
	CodexEnd   = "# <<< Codex installer <<<"
)

// Vendors and owners a Block names.
const (
	Codex             = "Codex"
	CodexUnterminated = "Codex (unterminated)"
	Debian            = "Debian's stock ~/.profile"
	Unknown           = "unknown"
)

// Block is one run of lines that puts ~/.local/bin ahead of PATH.
type Block struct {
	From, To int // 1-based line numbers, inclusive
	// Line is the line that puts ~/.local/bin first. It is 0 in a Codex
	// block that has no such line.
	Line   int
	Vendor string
	// Removable marks a block that is unambiguously a vendor's. --fix-rc
	// removes only those: an unmarked line may be the user's own.
	Removable bool
}

// Stock reports whether the block is the distribution's own, written when
// the account was made. It is no vendor's, so the take-over leaves it out.
func (b Block) Stock() bool { return b.Vendor == Debian }

// debianStock is the block /etc/skel/.profile gives every new account on
// Debian and Ubuntu, each line trimmed. The comment above it is optional.
var debianStock = []string{
	`if [ -d "$HOME/.local/bin" ] ; then`,
	`PATH="$HOME/.local/bin:$PATH"`,
	`fi`,
}

const debianComment = "# set PATH so it includes user's private bin if it exists"

// Find returns the blocks of text that put ~/.local/bin ahead of PATH, in
// order. Codex marks its block. Claude Code's is such a line right after a
// comment that names Claude. Debian's stock ~/.profile block is returned as
// Debian's, never removable. Any other such line is Unknown.
func Find(text []byte) []Block {
	if !strings.Contains(string(text), ".local/bin") && !strings.Contains(string(text), CodexBegin) {
		return nil
	}
	lines := strings.Split(string(text), "\n")
	var out []Block
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == CodexBegin:
			end := -1
			for j := i + 1; j < len(lines); j++ {
				if strings.TrimSpace(lines[j]) == CodexEnd {
					end = j
					break
				}
			}
			if end < 0 {
				out = append(out, Block{From: i + 1, To: i + 1, Vendor: CodexUnterminated})
				continue
			}
			b := Block{From: i + 1, To: end + 1, Vendor: Codex, Removable: true}
			for j := i + 1; j < end; j++ {
				if Prepends(lines[j]) {
					b.Line = j + 1
					break
				}
			}
			out = append(out, b)
			i = end
		case strings.HasPrefix(l, "#") && pathComment(l) != "" && i+1 < len(lines) && Prepends(lines[i+1]):
			out = append(out, Block{From: i + 1, To: i + 2, Line: i + 2, Vendor: pathComment(l), Removable: true})
			i++
		case isDebianStock(lines, i):
			b := Block{From: i + 1, To: i + len(debianStock), Line: i + 2, Vendor: Debian}
			if i > 0 && strings.TrimSpace(lines[i-1]) == debianComment {
				b.From--
			}
			out = append(out, b)
			i += len(debianStock) - 1
		case Prepends(l):
			out = append(out, Block{From: i + 1, To: i + 1, Line: i + 1, Vendor: Unknown})
		}
	}
	return out
}

func isDebianStock(lines []string, i int) bool {
	if i+len(debianStock) > len(lines) {
		return false
	}
	for k, want := range debianStock {
		if strings.TrimSpace(lines[i+k]) != want {
			return false
		}
	}
	return true
}

// Remove drops the removable blocks' lines from text and keeps every other
// byte.
func Remove(text []byte, blocks []Block) []byte {
	lines := strings.Split(string(text), "\n")
	drop := map[int]bool{}
	for _, b := range blocks {
		if b.Removable {
			for n := b.From; n <= b.To; n++ {
				drop[n-1] = true
			}
		}
	}
	out := make([]string, 0, len(lines))
	for i, l := range lines {
		if !drop[i] {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// pathAssign matches a POSIX shell assignment to PATH (bare, exported or
// declared) and zsh's path array.
var pathAssign = regexp.MustCompile(`(?:^|[\s;&|(])(?:export\s+|declare\s+-x\s+|typeset\s+-x\s+)?(PATH|path)(\+?)=`)

// Prepends reports whether one shell line puts ~/.local/bin ahead of the
// rest of PATH. A comment never does. An assignment does when ~/.local/bin
// comes before $PATH in the value, or the value has no $PATH at all.
// fish_add_path does unless told to append. fish's set does when
// ~/.local/bin comes before $PATH or $fish_user_paths.
func Prepends(line string) bool {
	l := strings.TrimSpace(line)
	if strings.HasPrefix(l, "#") || !strings.Contains(l, ".local/bin") {
		return false
	}
	fields := strings.Fields(l)
	switch fields[0] {
	case "fish_add_path":
		for _, f := range fields[1:] {
			if f == "--append" || len(f) > 1 && f[0] == '-' && f[1] != '-' && strings.ContainsRune(f, 'a') {
				return false
			}
		}
		return true
	case "set":
		return fishSetPrepends(fields[1:])
	}
	m := pathAssign.FindStringSubmatchIndex(l)
	if m == nil {
		return false
	}
	if m[4] < m[5] { // PATH+= appends
		return false
	}
	v := l[m[1]:]
	if cut := strings.IndexAny(v, ";&|#"); cut >= 0 {
		v = v[:cut]
	}
	lb := strings.Index(v, ".local/bin")
	if lb < 0 {
		return false
	}
	pv := firstIndex(v, "$PATH", "${PATH}", "$path", "${path}")
	return pv < 0 || lb < pv
}

// fishSetPrepends reads the arguments of fish's set: flags, the variable,
// then its values.
func fishSetPrepends(args []string) bool {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if args[0] == "--append" || args[0] == "-a" {
			return false
		}
		args = args[1:]
	}
	if len(args) < 2 || args[0] != "PATH" && args[0] != "fish_user_paths" {
		return false
	}
	for _, v := range args[1:] {
		switch {
		case strings.Contains(v, ".local/bin"):
			return true
		case strings.Contains(v, "$PATH") || strings.Contains(v, "$fish_user_paths"):
			return false
		}
	}
	return false
}

// firstIndex is the smallest index in s of any of subs, or -1.
func firstIndex(s string, subs ...string) int {
	best := -1
	for _, sub := range subs {
		if i := strings.Index(s, sub); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// pathComment names the vendor whose installer wrote comment line l (a
// profile's PathComment is in it), or "".
func pathComment(l string) string {
	l = strings.ToLower(l)
	for _, p := range agent.All() {
		if p.PathComment != "" && strings.Contains(l, p.PathComment) {
			return p.PathVendor
		}
	}
	return ""
}
