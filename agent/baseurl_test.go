package agent

import "testing"

// Every agent has an entry in the base-URL table, and no entry names an
// agent the table of profiles lacks.
func TestBaseURLsEveryAgent(t *testing.T) {
	for _, n := range Names() {
		if _, ok := baseURLs[n]; !ok {
			t.Errorf("agent %s has no entry in baseURLs (agent/baseurl.go)", n)
		}
	}
	for n, b := range baseURLs {
		if !Known(n) {
			t.Errorf("baseURLs names %q, which is no agent", n)
		}
		if (len(b.Env) > 0 || b.TOMLFile != "") && b.Vendor == "" {
			t.Errorf("%s: a base URL source without the vendor's documentation", n)
		}
		if b.TOMLFile != "" && len(b.TOMLKeys) == 0 {
			t.Errorf("%s: %s without keys", n, b.TOMLFile)
		}
	}
	if got := BaseURLSources("claude").Env; len(got) == 0 || got[0] != "ANTHROPIC_BASE_URL" {
		t.Errorf("claude's base URL variables: %v", got)
	}
}
