package docscheck

import (
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// pages is every markdown page of the documentation, as paths from the
// checkout's top.
func pages(t *testing.T, repo string) []string {
	t.Helper()
	out := []string{"README.md", "CONTRIBUTING.md"}
	err := filepath.WalkDir(filepath.Join(repo, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(repo, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLinks: every relative link in README.md, CONTRIBUTING.md and docs/
// names a file that exists and, for a markdown page, a heading it has.
func TestLinks(t *testing.T) {
	repo, err := Repo()
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]*Doc{}
	load := func(rel string) *Doc {
		if d, ok := docs[rel]; ok {
			return d
		}
		d, err := LoadRepo(rel)
		if err != nil {
			t.Fatal(err)
		}
		docs[rel] = d
		return d
	}
	for _, page := range pages(t, repo) {
		for _, l := range load(page).Links {
			u, err := url.Parse(l.Target)
			if err != nil {
				t.Errorf("%s:%d: link %q does not parse: %v", page, l.Line, l.Target, err)
				continue
			}
			if u.Scheme != "" || u.Host != "" {
				continue // absolute: not checked (no network)
			}
			target := page
			if u.Path != "" {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(page), u.Path))
			}
			st, err := os.Stat(filepath.Join(repo, target))
			if err != nil {
				t.Errorf("%s:%d: link %q: %s does not exist (fix the link, or add the page)", page, l.Line, l.Target, target)
				continue
			}
			if u.Fragment == "" || st.IsDir() || !strings.HasSuffix(target, ".md") {
				continue
			}
			if d := load(target); !d.Anchors[u.Fragment] {
				t.Errorf("%s:%d: link %q: %s has no heading whose anchor is #%s", page, l.Line, l.Target, target, u.Fragment)
			}
		}
	}
}

// TestTablesEnd: every table in README.md, CONTRIBUTING.md and docs/ ends
// with a blank line. A text line right after a table renders as more rows.
func TestTablesEnd(t *testing.T) {
	repo, err := Repo()
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages(t, repo) {
		d, err := LoadRepo(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range d.TableRuns {
			t.Errorf("%s:%d: a table runs on into this line, and GFM renders it as a row: put a blank line between the table and what follows it", page, line)
		}
	}
}

// statusLine is an ADR's Status paragraph, which may wrap.
var statusLine = regexp.MustCompile(`(?m)^Status: *((?:.+\n?)+)`)

// TestADRIndex: docs/adr/README.md has one row per ADR, with the status its
// Status line gives.
func TestADRIndex(t *testing.T) {
	repo, err := Repo()
	if err != nil {
		t.Fatal(err)
	}
	tb := TableOf(t, "docs/adr/README.md", "Index")
	ac, sc := tb.Col(t, "ADR"), tb.Col(t, "status")
	files, err := filepath.Glob(filepath.Join(repo, "docs/adr/[0-9]*.md"))
	if err != nil {
		t.Fatal(err)
	}
	status, title := map[string]string{}, map[string]string{}
	var code []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		code = append(code, name)
		title[name], _, _ = strings.Cut(string(b), "\n")
		if m := statusLine.FindSubmatch(b); m != nil {
			status[name] = strings.Join(strings.Fields(string(m[1])), " ")
		} else {
			t.Errorf("docs/adr/%s has no Status line", name)
		}
	}
	var doc []string
	for _, r := range tb.Rows {
		if len(r[ac].Links) == 0 {
			t.Errorf("docs/adr/README.md, row %q: the ADR cell should link the ADR's file", r[ac].Text)
			continue
		}
		name := r[ac].Links[0]
		doc = append(doc, name)
		if s, ok := status[name]; ok && r[sc].Text != s {
			t.Errorf("docs/adr/README.md, row %s: the status cell should be %q, the ADR's Status line (it says %q)", name, s, r[sc].Text)
		}
	}
	if msg := Diff(tb, "ADR", doc, code); msg != "" {
		t.Error(msg)
	}
	for _, name := range code {
		if !slices.Contains(doc, name) {
			num, _, _ := strings.Cut(name, "-")
			t.Errorf("docs/adr/README.md: the row for %s would be\n| [%s](%s) | %s | %s |", name, num, name, adrTitle.ReplaceAllString(title[name], ""), status[name])
		}
	}
}

// adrTitle is the part of an ADR's first line before its title.
var adrTitle = regexp.MustCompile(`^# *(0*[0-9]+[.:] *)?`)

// TestAnsibleVariables: the reference lists every variable of the role's
// defaults.
func TestAnsibleVariables(t *testing.T) {
	repo, err := Repo()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(repo, "ansible/ansible_collections/cco/agents/roles/install/defaults/main.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var vars map[string]any
	if err := yaml.Unmarshal(b, &vars); err != nil {
		t.Fatal(err)
	}
	TableOf(t, "docs/reference/ansible.md", "Role variables").Check(t, "variable", "variable", slices.Sorted(maps.Keys(vars)))
}
