package agent

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// exempt are the places outside this package, the per-agent files and
// testdata that may still spell an agent's name, each with the reason.
var exempt = map[string]string{
	"internal/realagents": "test support: the real agents' pinned packs, each naming the agent it is, as testdata does",
	"sandbox/appserver":   "Codex's own app-server helper (the profile's AppServer): a per-agent package",
	"sandbox/config.go":   "sandbox.toml's claude_skip_permissions, described in the default file; sandbox/ is being reworked",
}

// perAgentFile reports whether base (a file name without .go) is an
// agent's own source or policy file: <agent>.go or <agent>_<what>.go.
func perAgentFile(base string) bool {
	for _, n := range Names() {
		if base == n || strings.HasPrefix(base, n+"_") {
			return true
		}
	}
	return false
}

// Outside this package, an agent's own files and testdata, no Go source
// spells an agent's name in a string literal, alone or as a word or path
// element of a longer one ("/usr/local/bin/claude", "claude.channel"):
// every other package iterates Names() and reads the profile, so that
// adding an agent is a table entry. Tests are left out: a test names the
// agent it exercises, as testdata does.
func TestNoAgentNameLiterals(t *testing.T) {
	mod, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mod, "go.mod")); err != nil {
		t.Fatalf("no go.mod in %s: %v", mod, err)
	}
	found, scanned, err := nameLiterals(mod, exempt)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
	if scanned < 50 {
		t.Fatalf("scanned %d files under %s: the walk missed the module", scanned, mod)
	}
	// An exemption that nothing needs any more goes.
	all, _, err := nameLiterals(mod, nil)
	if err != nil {
		t.Fatal(err)
	}
	for e := range exempt {
		if !slices.ContainsFunc(all, func(f string) bool { return strings.HasPrefix(f, e+"/") || strings.HasPrefix(f, e+":") }) {
			t.Errorf("%s is exempt, but holds no agent name any more: remove it from exempt", e)
		}
	}
}

// nameLiterals lists, as "file:line: ...", every string literal under mod
// but the exempt places that holds an agent's name as a word, and counts
// the files it read.
func nameLiterals(mod string, exempt map[string]string) (found []string, scanned int, err error) {
	fset := token.NewFileSet()
	err = filepath.WalkDir(mod, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(mod, p)
		if _, skip := exempt[rel]; skip && rel != "." {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if rel == "agent" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		base, ok := strings.CutSuffix(d.Name(), ".go")
		if !ok || strings.HasSuffix(base, "_test") || perAgentFile(base) {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		scanned++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if name := nameIn(v); name != "" {
				pos := fset.Position(lit.Pos())
				found = append(found, fmt.Sprintf("%s:%d: the agent name %q in the literal %.60q: iterate agent.Names() or read the profile (agent.Lookup), or move it to the agent's own file (<agent>.go, <agent>_<what>.go)", rel, pos.Line, name, v))
			}
			return true
		})
		return nil
	})
	return found, scanned, err
}

// nameIn is the first agent name that s holds as a word: between the ends
// of s or characters that are not letters, digits, '_' or '-' (so "/bin/x"
// and "x.channel" hold x, "x-code" and "xish" do not).
func nameIn(s string) string {
	for _, n := range Names() {
		for i := 0; ; {
			j := strings.Index(s[i:], n)
			if j < 0 {
				break
			}
			start, end := i+j, i+j+len(n)
			if (start == 0 || !wordChar(s[start-1])) && (end == len(s) || !wordChar(s[end])) {
				return n
			}
			i = start + 1
		}
	}
	return ""
}

func wordChar(c byte) bool {
	return c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// The check itself: a literal in a plain file, alone or as a word of a
// longer one, is reported with its file and line; one in a per-agent file,
// a test, testdata, agent/ or an exempt place is not, nor a longer word.
func TestNameLiteralsReported(t *testing.T) {
	mod := t.TempDir()
	n := Names()[0]
	q := strconv.Quote
	// One exempt directory and one exempt file.
	var dir, file string
	for _, e := range slices.Sorted(maps.Keys(exempt)) {
		if strings.HasSuffix(e, ".go") {
			file = e
		} else {
			dir = e
		}
	}
	files := map[string]string{
		"go.mod":            "module x\n",
		"pkg/plain.go":      "package pkg\n\nvar a = 1\n\nvar b = " + q(n) + "\n",
		"pkg/" + n + ".go":  "package pkg\n\nvar c = " + q(n) + "\n",
		"pkg/plain_test.go": "package pkg\n\nvar d = " + q(n) + "\n",
		"pkg/testdata/x.go": "package x\n\nvar e = " + q(n) + "\n",
		"agent/table.go":    "package agent\n\nvar f = " + q(n) + "\n",
		"pkg/other.go":      "package pkg\n\nvar g = " + q("/usr/local/bin/"+n) + "\n\nvar h = " + q(n+".channel") + "\n\nvar i = " + q(n+"-code "+n+"ish x"+n) + "\n",
		dir + "/y.go":       "package y\n\nvar j = " + q(n) + "\n",
		file:                "package y\n\nvar k = " + q(n) + "\n",
	}
	for p, b := range files {
		if err := os.MkdirAll(filepath.Join(mod, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mod, p), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	found, _, err := nameLiterals(mod, exempt)
	if err != nil {
		t.Fatal(err)
	}
	var at []string
	for _, f := range found {
		at = append(at, f[:strings.Index(f, ": ")])
	}
	if want := []string{"pkg/other.go:3", "pkg/other.go:5", "pkg/plain.go:5"}; !slices.Equal(slices.Sorted(slices.Values(at)), want) {
		t.Fatalf("found %q, want exactly %q", found, want)
	}
}

func TestPerAgentFile(t *testing.T) {
	for base, want := range map[string]bool{"claude": true, "codex_sources": true, "managed": false, "claudeish": false, "plan": false} {
		if got := perAgentFile(base); got != want {
			t.Errorf("perAgentFile(%q) = %v, want %v", base, got, want)
		}
	}
}
