package agent

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pending are the directories whose agent lists move onto the table with
// the vendor step's sources; each entry goes when that lands.
var pending = map[string]string{}

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
// spells an agent's name as a string literal: every other package iterates
// Names() and reads the profile, so that adding an agent is a table entry.
func TestNoAgentNameLiterals(t *testing.T) {
	mod, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mod, "go.mod")); err != nil {
		t.Fatalf("no go.mod in %s: %v", mod, err)
	}
	found, scanned, err := nameLiterals(mod)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
	if scanned < 50 {
		t.Fatalf("scanned %d files under %s: the walk missed the module", scanned, mod)
	}
}

// nameLiterals lists, as "file:line: ...", every agent name spelled as a
// string literal under mod, and counts the files it read.
func nameLiterals(mod string) (found []string, scanned int, err error) {
	names := map[string]bool{}
	for _, n := range Names() {
		names[n] = true
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(mod, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(mod, p)
		if d.IsDir() {
			if _, skip := pending[rel]; skip || rel == "agent" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
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
			if v, err := strconv.Unquote(lit.Value); err == nil && names[v] {
				pos := fset.Position(lit.Pos())
				found = append(found, fmt.Sprintf("%s:%d: the agent name %q as a literal: iterate agent.Names() or read the profile (agent.Lookup) instead", rel, pos.Line, v))
			}
			return true
		})
		return nil
	})
	return found, scanned, err
}

// The check itself: a literal in a plain file is reported with its file and
// line; one in a per-agent file, a test, testdata or agent/ is not.
func TestNameLiteralsReported(t *testing.T) {
	mod := t.TempDir()
	n := Names()[0]
	files := map[string]string{
		"go.mod":            "module x\n",
		"pkg/plain.go":      "package pkg\n\nvar a = 1\n\nvar b = " + strconv.Quote(n) + "\n",
		"pkg/" + n + ".go":  "package pkg\n\nvar c = " + strconv.Quote(n) + "\n",
		"pkg/plain_test.go": "package pkg\n\nvar d = " + strconv.Quote(n) + "\n",
		"pkg/testdata/x.go": "package x\n\nvar e = " + strconv.Quote(n) + "\n",
		"agent/table.go":    "package agent\n\nvar f = " + strconv.Quote(n) + "\n",
		"pkg/other.go":      "package pkg\n\nvar g = " + strconv.Quote("/usr/local/bin/"+n) + "\n",
	}
	for p, b := range files {
		if err := os.MkdirAll(filepath.Join(mod, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mod, p), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	found, _, err := nameLiterals(mod)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || !strings.HasPrefix(found[0], "pkg/plain.go:5: ") {
		t.Fatalf("found %q, want exactly pkg/plain.go:5", found)
	}
}

func TestPerAgentFile(t *testing.T) {
	for base, want := range map[string]bool{"claude": true, "codex_sources": true, "managed": false, "claudeish": false, "plan": false} {
		if got := perAgentFile(base); got != want {
			t.Errorf("perAgentFile(%q) = %v, want %v", base, got, want)
		}
	}
}
