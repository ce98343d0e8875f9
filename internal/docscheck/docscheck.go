// Package docscheck reads the project's markdown so that tests can hold the
// documentation to the code: the tables of flags, keys, JSON fields and exit
// codes, and the relative links between the pages.
//
// A reference table is the documentation's copy of a fact the code owns. A
// test beside the code finds the table with TableOf and compares a column
// with the code's names with Table.Check. The failure names the row to add
// or remove, so a new key or flag cannot go undocumented.
package docscheck

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"

	"github.com/cco-dev/cco/internal/jailtest"
)

// Doc is one markdown file: its tables, its links and its heading anchors.
type Doc struct {
	Path    string
	Tables  []*Table
	Links   []Link
	Anchors map[string]bool
	// Headings are the headings' texts in order.
	Headings []string
	// TableRuns are the lines where a table runs on: a row that is not
	// written as one (GFM reads a text line right after a table as one more
	// row) or a line right after the table that is not blank.
	TableRuns []int
}

// Table is one GFM table and the heading it stands under.
type Table struct {
	Doc     string
	Heading string
	Header  []string
	Rows    [][]Cell
}

// Cell is one table cell: its plain text, and the code spans and link
// targets in it.
type Cell struct {
	Text  string
	Code  []string
	Links []string
}

// Link is a link or image target as written, with the line it is on.
type Link struct {
	Target string
	Line   int
}

var md = goldmark.New(goldmark.WithExtensions(extension.Table))

// LoadRepo parses the file at rel, a path from the checkout's top, and names
// it by rel in messages.
func LoadRepo(rel string) (*Doc, error) {
	repo, err := Repo()
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(filepath.Join(repo, rel))
	if err != nil {
		return nil, err
	}
	return Parse(rel, src), nil
}

// Parse parses markdown source; path names it in messages.
func Parse(path string, src []byte) *Doc {
	d := &Doc{Path: path, Anchors: map[string]bool{}}
	root := md.Parser().Parse(text.NewReader(src))
	heading := ""
	slugs := map[string]int{}
	ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			heading = plain(n, src)
			d.Headings = append(d.Headings, heading)
			d.Anchors[uniqueSlug(slugs, Slug(heading))] = true
		case *ast.Link:
			d.Links = append(d.Links, Link{Target: string(n.Destination), Line: lineOf(n, src)})
		case *ast.Image:
			d.Links = append(d.Links, Link{Target: string(n.Destination), Line: lineOf(n, src)})
		case *east.Table:
			d.Tables = append(d.Tables, table(path, heading, n, src))
			d.TableRuns = append(d.TableRuns, tableRuns(n, src)...)
		}
		return ast.WalkContinue, nil
	})
	return d
}

func table(path, heading string, n *east.Table, src []byte) *Table {
	t := &Table{Doc: path, Heading: heading}
	for row := n.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []Cell
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			cell := Cell{Text: plain(c, src)}
			ast.Walk(c, func(m ast.Node, entering bool) (ast.WalkStatus, error) {
				if !entering {
					return ast.WalkContinue, nil
				}
				switch m := m.(type) {
				case *ast.CodeSpan:
					cell.Code = append(cell.Code, plain(m, src))
					return ast.WalkSkipChildren, nil
				case *ast.Link:
					cell.Links = append(cell.Links, string(m.Destination))
				}
				return ast.WalkContinue, nil
			})
			cells = append(cells, cell)
		}
		if _, ok := row.(*east.TableHeader); ok {
			for _, c := range cells {
				t.Header = append(t.Header, c.Text)
			}
			continue
		}
		t.Rows = append(t.Rows, cells)
	}
	return t
}

// tableRuns is the 1-based lines where table n runs on into text: each row
// whose line does not start with '|', and the line after the last row
// unless it is blank or the end of the file. Blockquote markers and
// indentation before a row are not the row's.
func tableRuns(n *east.Table, src []byte) []int {
	var lines []int
	var last ast.Node
	for row := n.FirstChild(); row != nil; row = row.NextSibling() {
		last = row
		if !strings.HasPrefix(rowText(src, row.Pos()), "|") {
			lines = append(lines, bytes.Count(src[:row.Pos()], []byte("\n"))+1)
		}
	}
	if last == nil {
		return lines
	}
	end := bytes.IndexByte(src[last.Pos():], '\n')
	if end < 0 {
		return lines
	}
	next := last.Pos() + end + 1
	if next < len(src) && rowText(src, next) != "" {
		lines = append(lines, bytes.Count(src[:next], []byte("\n"))+1)
	}
	return lines
}

// rowText is the line of src that holds offset off, without its
// indentation and blockquote markers.
func rowText(src []byte, off int) string {
	start := bytes.LastIndexByte(src[:off], '\n') + 1
	end := bytes.IndexByte(src[off:], '\n')
	if end < 0 {
		end = len(src) - off
	}
	return strings.TrimLeft(string(src[start:off+end]), " \t>")
}

// plain is a node's text as a reader sees it: code spans without their
// backticks, links as their text.
func plain(n ast.Node, src []byte) string {
	var b strings.Builder
	ast.Walk(n, func(m ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch m := m.(type) {
		case *ast.Text:
			b.Write(m.Segment.Value(src))
			if m.SoftLineBreak() || m.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(m.Value)
		case *ast.RawHTML:
			for i := 0; i < m.Segments.Len(); i++ {
				s := m.Segments.At(i)
				b.Write(s.Value(src))
			}
		}
		return ast.WalkContinue, nil
	})
	return strings.TrimSpace(b.String())
}

// lineOf is the 1-based line of the first text below n, or 0.
func lineOf(n ast.Node, src []byte) int {
	line := 0
	ast.Walk(n, func(m ast.Node, entering bool) (ast.WalkStatus, error) {
		if t, ok := m.(*ast.Text); ok && entering && line == 0 {
			line = bytes.Count(src[:t.Segment.Start], []byte("\n")) + 1
			return ast.WalkStop, nil
		}
		return ast.WalkContinue, nil
	})
	return line
}

// Slug is GitHub's anchor for a heading's text: lower case, spaces to
// hyphens, every other character but letters, digits, '-' and '_' dropped.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// uniqueSlug numbers a repeated slug the way GitHub does: x, x-1, x-2.
func uniqueSlug(seen map[string]int, s string) string {
	n, ok := seen[s]
	seen[s] = n + 1
	if !ok {
		return s
	}
	return fmt.Sprintf("%s-%d", s, n)
}

// Table is the first table under the heading whose text is heading.
func (d *Doc) Table(heading string) (*Table, error) {
	for _, t := range d.Tables {
		if t.Heading == heading {
			return t, nil
		}
	}
	return nil, fmt.Errorf("%s: no table under the heading %q (headings: %q)", d.Path, heading, d.Headings)
}

// Column is the index of the column named name, or an error naming the
// columns there are.
func (t *Table) Column(name string) (int, error) {
	i := slices.Index(t.Header, name)
	if i < 0 {
		return 0, fmt.Errorf("%s, table under %q: no column %q (columns: %q)", t.Doc, t.Heading, name, t.Header)
	}
	return i, nil
}

// Names is every code span of column col, row by row: a row that names
// several keys in one cell gives them all.
func (t *Table) Names(col int) []string {
	var out []string
	for _, r := range t.Rows {
		if col < len(r) {
			out = append(out, r[col].Code...)
		}
	}
	return out
}

// Diff compares the names a table lists with the code's. The message names
// each row to add and each to remove, or is empty when they agree.
func Diff(t *Table, what string, doc, code []string) string {
	var add, remove []string
	for _, c := range code {
		if !slices.Contains(doc, c) && !slices.Contains(add, c) {
			add = append(add, c)
		}
	}
	for _, d := range doc {
		if !slices.Contains(code, d) && !slices.Contains(remove, d) {
			remove = append(remove, d)
		}
	}
	var msg []string
	for _, a := range add {
		msg = append(msg, fmt.Sprintf("add a row for %s `%s` (the code has it)", what, a))
	}
	for _, r := range remove {
		msg = append(msg, fmt.Sprintf("remove the row for %s `%s` (the code has no such %s)", what, r, what))
	}
	if len(msg) == 0 {
		return ""
	}
	return fmt.Sprintf("%s, table under %q:\n  %s", t.Doc, t.Heading, strings.Join(msg, "\n  "))
}

// Repo is the checkout's top directory: the one holding go.mod.
func Repo() (string, error) { return jailtest.ModuleRoot() }

// TableOf is the table under heading in the file rel (a path from the
// checkout's top); it ends the test when there is none.
func TableOf(t testing.TB, rel, heading string) *Table {
	t.Helper()
	d, err := LoadRepo(rel)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := d.Table(heading)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// Col is the index of the column named name; it ends the test when there is
// none.
func (t *Table) Col(tb testing.TB, name string) int {
	tb.Helper()
	i, err := t.Column(name)
	if err != nil {
		tb.Fatal(err)
	}
	return i
}

// Check fails the test when the names in column col differ from the code's,
// naming each row to add or remove.
func (t *Table) Check(tb testing.TB, col, what string, code []string) {
	tb.Helper()
	if msg := Diff(t, what, t.Names(t.Col(tb, col)), code); msg != "" {
		tb.Error(msg)
	}
}

// JSONFields is the JSON field names of a struct type, embedded structs
// flattened, fields tagged "-" left out.
func JSONFields(typ reflect.Type) []string {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")[0]
		if f.Anonymous && tag == "" {
			out = append(out, JSONFields(f.Type)...)
			continue
		}
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		out = append(out, tag)
	}
	return out
}
