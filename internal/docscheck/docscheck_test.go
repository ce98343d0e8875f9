package docscheck

import (
	"slices"
	"strings"
	"testing"
)

func TestParseTablesLinksAnchors(t *testing.T) {
	src := "# cco\n\n## Flags: `--root` and more\n\n| flag | meaning |\n| --- | --- |\n" +
		"| `--upgrade claude\\|codex` | see [the tutorial](../tutorial.md#first-run) |\n" +
		"| `--a`, `--b` | two |\n\n```\n[not a link](nowhere.md)\n```\n\n## Flags: `--root` and more\n"
	d := Parse("x.md", []byte(src))
	for _, a := range []string{"cco", "flags---root-and-more", "flags---root-and-more-1"} {
		if !d.Anchors[a] {
			t.Errorf("anchor %q missing: %v", a, d.Anchors)
		}
	}
	tb, err := d.Table("Flags: --root and more")
	if err != nil {
		t.Fatal(err)
	}
	if got := tb.Names(0); !slices.Equal(got, []string{"--upgrade claude|codex", "--a", "--b"}) {
		t.Errorf("names %q", got)
	}
	if len(d.Links) != 1 || d.Links[0].Target != "../tutorial.md#first-run" || d.Links[0].Line != 7 {
		t.Errorf("links %+v", d.Links)
	}
	if _, err := d.Table("nope"); err == nil || !strings.Contains(err.Error(), "Flags: --root and more") {
		t.Errorf("a missing table's error should list the headings: %v", err)
	}
}

func TestDiffNamesRows(t *testing.T) {
	tb := &Table{Doc: "r.md", Heading: "Keys"}
	msg := Diff(tb, "key", []string{"a", "old"}, []string{"a", "new"})
	if !strings.Contains(msg, "add a row for key `new`") || !strings.Contains(msg, "remove the row for key `old`") {
		t.Errorf("message: %s", msg)
	}
	if Diff(tb, "key", []string{"a"}, []string{"a"}) != "" {
		t.Error("equal sets must give no message")
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Scheduled upgrades (cco-upgrade.timer)":  "scheduled-upgrades-cco-upgradetimer",
		"Package repositories (mkpkg --apt-repo)": "package-repositories-mkpkg---apt-repo",
		"/etc/cco/sandbox.toml":                   "etcccosandboxtoml",
		"The agent's terminal":                    "the-agents-terminal",
		"Diátaxis":                                "diátaxis",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTableRuns(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []int
	}{
		{"blank after", "| a | b |\n| --- | --- |\n| 1 | 2 |\n\ntext\n", nil},
		{"end of file", "| a | b |\n| --- | --- |\n| 1 | 2 |", nil},
		{"text runs on", "| a | b |\n| --- | --- |\n| 1 | 2 |\n Each agent\nkeeps\n\nx\n", []int{4, 5}},
		{"heading right after", "| a |\n| --- |\n| 1 |\n## next\n", []int{4}},
		{"in a blockquote", "> | a |\n> | --- |\n> | 1 |\n>\n> text\n", nil},
		{"in a list", "- item\n\n  | a |\n  | --- |\n  | 1 |\n\n- next\n", nil},
		{"in a fence", "```\n| a |\n| --- |\ntext\n```\n", nil},
	} {
		if got := Parse("x.md", []byte(tc.src)).TableRuns; !slices.Equal(got, tc.want) {
			t.Errorf("%s: TableRuns = %v, want %v", tc.name, got, tc.want)
		}
	}
}
