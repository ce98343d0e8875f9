package rcfile

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestPrepends(t *testing.T) {
	cases := []struct {
		line string
		want bool
	}{
		{`export PATH="$HOME/.local/bin:$PATH"`, true},
		{`PATH="$HOME/.local/bin:$PATH"`, true},
		{`  PATH=$HOME/.local/bin:${PATH}`, true},
		{`export PATH=~/.local/bin:/usr/bin`, true}, // no $PATH: ~/.local/bin is first
		{`export PATH="/home/ada/.local/bin:$PATH"; export EDITOR=vi`, true},
		{`path=(~/.local/bin $path)`, true},
		{`typeset -x PATH="$HOME/.local/bin:$PATH"`, true},
		{`fish_add_path ~/.local/bin`, true},
		{`fish_add_path -P $HOME/.local/bin`, true},
		{`set -gx PATH $HOME/.local/bin $PATH`, true},
		{`set -U fish_user_paths ~/.local/bin $fish_user_paths`, true},

		{`PATH="$PATH:$HOME/.local/bin"`, false},
		{`PATH+=":$HOME/.local/bin"`, false},
		{`path=($path ~/.local/bin)`, false},
		{`fish_add_path --append ~/.local/bin`, false},
		{`fish_add_path -aP ~/.local/bin`, false},
		{`set -gx PATH $PATH $HOME/.local/bin`, false},
		{`set -a PATH ~/.local/bin`, false},
		{`# export PATH="$HOME/.local/bin:$PATH"`, false},
		{`MANPATH="$HOME/.local/share/man:$HOME/.local/bin"`, false},
		{`export PATH="$HOME/bin:$PATH"`, false},
		{`if [ -d "$HOME/.local/bin" ] ; then`, false},
		{`alias lb='ls ~/.local/bin'`, false},
	}
	for _, c := range cases {
		if got := Prepends(c.line); got != c.want {
			t.Errorf("Prepends(%q) = %v, want %v", c.line, got, c.want)
		}
	}
}

// The stock ~/.profile of a Debian account (testdata holds bash's
// /etc/skel/.profile as Debian 12 ships it) is Debian's block, never a
// vendor's, and --fix-rc leaves it byte for byte.
func TestDebianStockProfile(t *testing.T) {
	stock, err := os.ReadFile("testdata/debian-skel-profile")
	if err != nil {
		t.Fatal(err)
	}
	got := Find(stock)
	want := []Block{{From: 24, To: 27, Line: 26, Vendor: Debian}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Find(stock .profile) = %+v, want %+v", got, want)
	}
	if !got[0].Stock() || got[0].Removable {
		t.Errorf("the stock block must be Stock and not removable: %+v", got[0])
	}
	if out := Remove(stock, got); string(out) != string(stock) {
		t.Errorf("Remove changed the stock .profile:\n%s", out)
	}

	// A vendor's line after it is still found, and only that is removable.
	withClaude := string(stock) + "\n# Added by Claude Code installer\nexport PATH=\"$HOME/.local/bin:$PATH\"\n"
	got = Find([]byte(withClaude))
	if len(got) != 2 || !got[0].Stock() || got[1].Vendor != Claude || !got[1].Removable || got[1].From != 29 || got[1].To != 30 {
		t.Fatalf("Find(stock + Claude) = %+v", got)
	}
	if out := Remove([]byte(withClaude), got); string(out) != string(stock)+"\n" {
		t.Errorf("Remove(stock + Claude) = %q, want the stock text and the blank line after it", out)
	}

	// The same lines edited (another directory first) are no longer stock.
	edited := strings.Replace(string(stock), `PATH="$HOME/.local/bin:$PATH"`, `PATH="$HOME/.local/bin:$HOME/go/bin:$PATH"`, 1)
	got = Find([]byte(edited))
	if len(got) != 1 || got[0].Vendor != Unknown || got[0].Line != 26 || got[0].Removable {
		t.Fatalf("Find(edited .profile) = %+v, want one unknown line 26", got)
	}
}

func TestFind(t *testing.T) {
	text := strings.Join([]string{
		"alias ll='ls -l'", // 1
		"",
		CodexBegin, // 3
		`export PATH="$HOME/.local/bin:$PATH"`,
		CodexEnd, // 5
		"",
		"# Added by Claude Code", // 7
		`export PATH="$HOME/.local/bin:$PATH"`,
		`export PATH="$PATH:$HOME/.local/bin"`, // 9: appends, not ahead
		`export PATH="$HOME/.local/bin:$PATH"`, // 10: unmarked
		"# >>> Codex installer >>>",            // 11: never closed
		`fish_add_path ~/.local/bin`,           // 12
		"",
	}, "\n")
	want := []Block{
		{From: 3, To: 5, Line: 4, Vendor: Codex, Removable: true},
		{From: 7, To: 8, Line: 8, Vendor: Claude, Removable: true},
		{From: 10, To: 10, Line: 10, Vendor: Unknown},
		{From: 11, To: 11, Vendor: CodexUnterminated},
		{From: 12, To: 12, Line: 12, Vendor: Unknown},
	}
	got := Find([]byte(text))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Find =\n%+v\nwant\n%+v", got, want)
	}
	wantText := strings.Join([]string{
		"alias ll='ls -l'",
		"",
		"",
		`export PATH="$PATH:$HOME/.local/bin"`,
		`export PATH="$HOME/.local/bin:$PATH"`,
		"# >>> Codex installer >>>",
		`fish_add_path ~/.local/bin`,
		"",
	}, "\n")
	if out := string(Remove([]byte(text), got)); out != wantText {
		t.Errorf("Remove =\n%s\nwant\n%s", out, wantText)
	}
	if got := Find([]byte("alias ll='ls -l'\n")); got != nil {
		t.Errorf("Find(no PATH line) = %+v", got)
	}
}

// Claude is the vendor name the claude profile's PathVendor gives its block.
const Claude = "Claude Code"
