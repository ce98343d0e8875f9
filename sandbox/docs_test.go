package sandbox_test

// The reference pages' sandbox.toml table and the jail's JSON documents are
// held to the code here.

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/docscheck"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/sandbox/caches"
	"github.com/cco-dev/cco/sandbox/egress"
	"github.com/cco-dev/cco/sandbox/toolchains"
)

// TestDocsSandboxKeys: every key sandbox.toml takes has a row, and the
// default file cco-install writes shows every key too.
func TestDocsSandboxKeys(t *testing.T) {
	var code []string
	typ := reflect.TypeOf(sandbox.Config{})
	for i := 0; i < typ.NumField(); i++ {
		if k := strings.Split(typ.Field(i).Tag.Get("toml"), ",")[0]; k != "" && k != "-" {
			code = append(code, k)
		}
	}
	docscheck.TableOf(t, "docs/reference/configuration.md", "sandbox.toml").Check(t, "key", "key", code)
	for _, k := range code {
		if !strings.Contains(sandbox.DefaultConfigTOML, "# "+k+" = ") {
			t.Errorf("DefaultConfigTOML does not show the key %s at its default", k)
		}
	}
}

func TestDocsJailJSON(t *testing.T) {
	docscheck.TableOf(t, "docs/reference/json.md", "Jail marker").Check(t, "field", "field", docscheck.JSONFields(reflect.TypeOf(sandbox.Marker{})))
	docscheck.TableOf(t, "docs/reference/json.md", "Egress audit log").Check(t, "field", "field", docscheck.JSONFields(reflect.TypeOf(egress.Entry{})))
}

// TestDocsShippedAllowlists: the reference's rows are the shipped lists,
// split into each agent's own names and the names all agents share (the
// row "all").
func TestDocsShippedAllowlists(t *testing.T) {
	tb := docscheck.TableOf(t, "docs/reference/egress.md", "Shipped allowlists")
	ac, nc := tb.Col(t, "agent"), tb.Col(t, "names")
	lists := map[string][]string{}
	for _, a := range agent.Names() {
		lists[a] = egress.DefaultAllow(a)
	}
	shared := func(n string) bool {
		for _, l := range lists {
			if !slices.Contains(l, n) {
				return false
			}
		}
		return true
	}
	want := map[string][]string{}
	for i, a := range agent.Names() {
		for _, n := range lists[a] {
			switch {
			case !shared(n):
				want[a] = append(want[a], n)
			case i == 0:
				want["all"] = append(want["all"], n)
			}
		}
	}
	for _, r := range tb.Rows {
		agent := r[ac].Text
		sub := &docscheck.Table{Doc: tb.Doc, Heading: tb.Heading + ", row " + agent}
		if msg := docscheck.Diff(sub, "name", r[nc].Code, want[agent]); msg != "" {
			t.Error(msg)
		}
		delete(want, agent)
	}
	for agent := range want {
		t.Errorf("%s, table under %q: add a row for %s", tb.Doc, tb.Heading, agent)
	}
}

// TestDocsToolchains: the reference's tables are the shipped home_read_only
// list, the masked credential files, the cache places and each agent's own
// variables.
func TestDocsToolchains(t *testing.T) {
	const doc = "docs/reference/toolchains.md"
	docscheck.TableOf(t, doc, "The shipped list").Check(t, "tree", "tree", toolchains.Default)
	var creds, credDirs []string
	for _, c := range toolchains.Credentials {
		creds = append(creds, c.Name)
	}
	for _, c := range toolchains.CredentialDirs {
		credDirs = append(credDirs, "~/"+c)
	}
	docscheck.TableOf(t, doc, "Masked credential files").Check(t, "name", "name", creds)
	docscheck.TableOf(t, doc, "Masked credential directories").Check(t, "path", "path", credDirs)
	places := []string{"~/" + caches.Home}
	for _, p := range caches.Places {
		places = append(places, "~/"+p.Jail)
	}
	docscheck.TableOf(t, doc, "Caches").Check(t, "place in the jail", "place", places)
	tb := docscheck.TableOf(t, doc, "The agent's own variables")
	ac, lc, pc := tb.Col(t, "agent"), tb.Col(t, "login (credentials)"), tb.Col(t, "provider settings")
	rows := map[string]bool{}
	for _, r := range tb.Rows {
		p, ok := agent.Lookup(r[ac].Text)
		if !ok {
			t.Errorf("%s: a row for %q, which is no agent", doc, r[ac].Text)
			continue
		}
		rows[p.Name] = true
		sub := &docscheck.Table{Doc: tb.Doc, Heading: tb.Heading + ", row " + p.Name}
		if msg := docscheck.Diff(sub, "credential", r[lc].Code, p.Credentials); msg != "" {
			t.Error(msg)
		}
		if msg := docscheck.Diff(sub, "provider variable", r[pc].Code, p.ProviderEnv); msg != "" {
			t.Error(msg)
		}
	}
	for _, n := range agent.Names() {
		if !rows[n] {
			t.Errorf("%s, table under %q: add a row for %s", doc, tb.Heading, n)
		}
	}
}
