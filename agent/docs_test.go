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
