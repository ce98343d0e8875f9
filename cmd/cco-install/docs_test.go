package main

// The reference pages' tables are held to the code here: the flags of every
// command, the install.toml keys, the exit codes and the JSON documents.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/docscheck"
	"github.com/cco-dev/cco/provision"
)

// allCommands is the commands cell of a flag every command takes.
const allCommands = "all commands"

// TestDocsFlags: every visible flag of every command has a row in the
// reference, with the commands that take it.
func TestDocsFlags(t *testing.T) {
	tb := docscheck.TableOf(t, "docs/reference/cco-install.md", "Flags")
	fc, cc, kc := tb.Col(t, "flag"), tb.Col(t, "commands"), tb.Col(t, "key")

	code := map[string][]string{}
	root := newCommand(context.Background(), &options{}, stdio{})
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			code[f.Name] = []string{allCommands}
		}
	})
	for _, c := range append([]*cobra.Command{root}, root.Commands()...) {
		if c.Hidden {
			continue
		}
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				code[f.Name] = append(code[f.Name], c.Name())
			}
		})
	}
	// --image is a switch of its own that does what image = "yes" does.
	flagKey := map[string]string{"image": "image"}
	for _, k := range keys {
		if k.flag != "" {
			flagKey[k.flag] = k.name
		}
	}

	doc := map[string][]string{}
	docKey := map[string]string{}
	for _, r := range tb.Rows {
		if len(r[fc].Code) == 0 {
			t.Errorf("%s: a row of the Flags table names no flag in code: %q", tb.Doc, r[fc].Text)
			continue
		}
		name := strings.TrimPrefix(strings.Fields(r[fc].Code[0])[0], "--")
		cmds := r[cc].Code
		if r[cc].Text == allCommands {
			cmds = []string{allCommands}
		}
		doc[name] = cmds
		if len(r[kc].Code) > 0 {
			docKey[name] = r[kc].Code[0]
		}
	}
	if msg := docscheck.Diff(tb, "flag", prefixed(slices.Sorted(maps.Keys(doc))), prefixed(slices.Sorted(maps.Keys(code)))); msg != "" {
		t.Error(msg)
	}
	for name, cmds := range code {
		got, ok := doc[name]
		if !ok {
			continue
		}
		sort.Strings(got)
		sort.Strings(cmds)
		if !slices.Equal(got, cmds) {
			t.Errorf("%s, row --%s: the commands cell should be %s (it says %s)", tb.Doc, name, cellList(cmds), cellList(got))
		}
		if docKey[name] != flagKey[name] {
			t.Errorf("%s, row --%s: the key cell should be %q (it says %q)", tb.Doc, name, flagKey[name], docKey[name])
		}
	}
}

func cellList(cmds []string) string {
	if slices.Equal(cmds, []string{allCommands}) {
		return allCommands
	}
	var q []string
	for _, c := range cmds {
		q = append(q, "`"+c+"`")
	}
	return strings.Join(q, ", ")
}

func prefixed(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "--" + n
	}
	return out
}

// TestDocsInstallKeys: every install.toml key has a row with its variable,
// its flag and (where it has one) its default as TOML writes it.
func TestDocsInstallKeys(t *testing.T) {
	tb := docscheck.TableOf(t, "docs/reference/configuration.md", "install.toml")
	kc, vc, fc, dc := tb.Col(t, "key"), tb.Col(t, "variable"), tb.Col(t, "flag"), tb.Col(t, "default")
	var code, doc []string
	rows := map[string][]docscheck.Cell{}
	for _, k := range keys {
		code = append(code, k.name)
	}
	for _, r := range tb.Rows {
		if len(r[kc].Code) == 0 {
			t.Errorf("%s: a row of the install.toml table names no key in code: %q", tb.Doc, r[kc].Text)
			continue
		}
		doc = append(doc, r[kc].Code[0])
		rows[r[kc].Code[0]] = r
	}
	if msg := docscheck.Diff(tb, "key", doc, code); msg != "" {
		t.Error(msg)
	}
	for _, k := range keys {
		env := "CCO_" + strings.ToUpper(strings.ReplaceAll(k.name, ".", "_"))
		flag := ""
		if k.flag != "" {
			flag = "--" + k.flag
		}
		r, ok := rows[k.name]
		if !ok {
			t.Errorf("%s: the row for %s would be\n| `%s` | `%s` | %s | `%s` | %s |", tb.Doc, k.name, k.name, env, codeSpan(flag), tomlValue(t, k.def), k.doc)
			continue
		}
		if r[vc].Text != env {
			t.Errorf("%s, row %s: the variable cell should be `%s` (it says %q)", tb.Doc, k.name, env, r[vc].Text)
		}
		if r[fc].Text != flag {
			t.Errorf("%s, row %s: the flag cell should be %q (it says %q)", tb.Doc, k.name, flag, r[fc].Text)
		}
		if def := tomlValue(t, k.def); def != `""` && !slices.Contains(r[dc].Code, def) {
			t.Errorf("%s, row %s: the default cell should show `%s`, the code's default (it says %q)", tb.Doc, k.name, def, r[dc].Text)
		}
	}
}

// codeSpan is s as a code span, or nothing when s is empty.
func codeSpan(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}

// tomlValue is a default as install.toml writes it.
func tomlValue(t *testing.T, v any) string {
	t.Helper()
	b, err := toml.Marshal(map[string]any{"k": v})
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(strings.TrimPrefix(string(b), "k = "))
	// go-toml writes single quotes; the docs write the same string in
	// double quotes, and lists with a space after the comma.
	s = regexp.MustCompile(`'([^']*)'`).ReplaceAllString(s, `"$1"`)
	return strings.ReplaceAll(s, `","`, `", "`)
}

// TestDocsExitCodes: the exit codes table lists exactly the codes the code
// returns, and the --help text lists the same.
func TestDocsExitCodes(t *testing.T) {
	tb := docscheck.TableOf(t, "docs/reference/cco-install.md", "Exit codes")
	code := []string{}
	for _, c := range []int{provision.ExitOK, provision.ExitFailed, provision.ExitUsage, provision.ExitConflict, 128 + 2, 128 + 15} {
		code = append(code, fmt.Sprint(c))
	}
	tb.Check(t, "code", "exit code", code)
	help := regexp.MustCompile(`\b\d+\b`).FindAllString(exitCodes, -1)
	for _, c := range code {
		if !slices.Contains(help, c) {
			t.Errorf("the --help text's exit codes (exitCodes in main.go) do not name %s", c)
		}
	}
}

func TestDocsJSON(t *testing.T) {
	for heading, v := range map[string]any{
		"Install report":    provision.Report{},
		"Step":              provision.StepReport{},
		"Status report":     statusDoc{},
		"Status path":       provision.PathStatus{},
		"Finding":           provision.Finding{},
		"Agent line":        agentLine{},
		"Config key":        configLine{},
		"Config problem":    configProblem{},
		"Error document":    errorDoc{},
		"Version document":  versionDoc{},
		"last-upgrade.json": lastUpgrade{},
		"Receipt":           provision.Receipt{},
		"Receipt entry":     provision.Entry{},
		"Relocation":        provision.Relocation{},
	} {
		docscheck.TableOf(t, "docs/reference/json.md", heading).Check(t, "field", "field", docscheck.JSONFields(reflect.TypeOf(v)))
	}
}

// TestDocsConfigJSON: the config document's top-level fields, read from a
// real run over a file with a bad key (so that problems is there too).
func TestDocsConfigJSON(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc/cco"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ConfigPath), []byte("Agents = []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	run([]string{"config", "--json", "--root", root}, strings.NewReader(""), &out, &errOut)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("config --json: %v\n%s%s", err, out.String(), errOut.String())
	}
	docscheck.TableOf(t, "docs/reference/json.md", "Config document").Check(t, "field", "field", slices.Sorted(maps.Keys(doc)))
}

// TestDocsNameEveryAgent: the pages a new operator reads first name every
// agent of the table: the tutorial, the Ansible reference and the
// first-login how-to, which also names each agent's API key variable.
func TestDocsNameEveryAgent(t *testing.T) {
	repo, err := docscheck.Repo()
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"docs/tutorial.md", "docs/reference/ansible.md", "docs/how-to/first-login.md"} {
		b, err := os.ReadFile(filepath.Join(repo, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range agent.Names() {
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).Match(b) {
				t.Errorf("%s does not name the agent %s: name it where the others are", rel, name)
			}
			if p, _ := agent.Lookup(name); rel == "docs/how-to/first-login.md" && len(p.Credentials) > 0 && !strings.Contains(string(b), "`"+p.Credentials[0]+"`") {
				t.Errorf("%s: the API keys table has no row for %s's %s", rel, name, p.Credentials[0])
			}
		}
	}
}
