package agent_test

import (
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/docscheck"
)

// docs/reference/agents.md's telemetry and refused-variable tables say
// what the profiles say.
func TestDocsAgents(t *testing.T) {
	tel := docscheck.TableOf(t, "docs/reference/agents.md", "Telemetry")
	ref := docscheck.TableOf(t, "docs/reference/agents.md", "Variables no pass_env may carry")
	for _, p := range agent.All() {
		for _, c := range []struct {
			tb   *docscheck.Table
			col  string
			want []string
		}{{tel, "switches", p.Telemetry}, {ref, "refused", p.RefusedEnv}} {
			if len(c.want) == 0 {
				continue
			}
			ac, vc := c.tb.Col(t, "agent"), c.tb.Col(t, c.col)
			found := false
			for _, r := range c.tb.Rows {
				if r[ac].Text != p.Name {
					continue
				}
				found = true
				for _, w := range c.want {
					if !strings.Contains(r[vc].Text, w) {
						t.Errorf("docs/reference/agents.md, %s row %s lacks %s", c.tb.Heading, p.Name, w)
					}
				}
			}
			if !found {
				t.Errorf("docs/reference/agents.md, %s: add a row for %s: %s", c.tb.Heading, p.Name, strings.Join(c.want, ", "))
			}
		}
	}
}

// docs/reference/environment.md's settings table names every profile's
// SettingsEnv, and its cloud table every switch and the variables it
// sets.
func TestDocsSettingsAndClouds(t *testing.T) {
	tb := docscheck.TableOf(t, "docs/reference/environment.md", "The agent's settings variables")
	ac, pc, sc, nc := tb.Col(t, "agent"), tb.Col(t, "passes"), tb.Col(t, "source"), tb.Col(t, "not passed, though a prefix matches")
	for _, p := range agent.All() {
		found := false
		for _, r := range tb.Rows {
			if r[ac].Text != p.Name {
				continue
			}
			found = true
			for _, s := range p.SettingsEnv {
				if !strings.Contains(r[pc].Text, s) {
					t.Errorf("docs/reference/environment.md, %s row %s lacks %s", tb.Heading, p.Name, s)
				}
			}
			for _, n := range p.SettingsRefused() {
				if !strings.Contains(r[nc].Text, n) {
					t.Errorf("docs/reference/environment.md, %s row %s: the not-passed column lacks %s", tb.Heading, p.Name, n)
				}
			}
			if len(p.SettingsEnv) == 0 && !strings.Contains(r[pc].Text, "none") {
				t.Errorf("docs/reference/environment.md, %s row %s: say none", tb.Heading, p.Name)
			}
			if strings.TrimSpace(r[sc].Text) == "" {
				t.Errorf("docs/reference/environment.md, %s row %s names no source", tb.Heading, p.Name)
			}
		}
		if !found {
			t.Errorf("docs/reference/environment.md, %s: add a row for %s", tb.Heading, p.Name)
		}
	}
	cl := docscheck.TableOf(t, "docs/reference/environment.md", "Cloud credentials")
	swc, agc, gc := cl.Col(t, "switch"), cl.Col(t, "agent"), cl.Col(t, "the jail gets")
	for _, p := range agent.All() {
		for sw, cloud := range p.Clouds {
			found := false
			for _, r := range cl.Rows {
				if r[swc].Text == sw && r[agc].Text == p.Name {
					found = true
					for _, v := range agent.CloudVars(cloud) {
						if !strings.Contains(r[gc].Text, v) && !strings.Contains(r[gc].Text, "the same") {
							t.Errorf("docs/reference/environment.md, %s row %s lacks %s", cl.Heading, sw, v)
						}
					}
				}
			}
			if !found {
				t.Errorf("docs/reference/environment.md, %s: add a row for %s (%s)", cl.Heading, sw, p.Name)
			}
		}
	}
}
