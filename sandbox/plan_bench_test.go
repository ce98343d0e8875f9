package sandbox

import (
	"os"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
)

// BenchmarkPlanPrepareFinish is the shadow's own host-side work for one
// launch in a repository that lacks the names git follows but does not
// make (placeholders each launch).
func BenchmarkPlanPrepareFinish(b *testing.B) {
	b.Run("quiet", func(b *testing.B) {
		f := newFixture(b)
		testenv.Must(b, os.WriteFile(f.ws+"/.claude/settings.local.json", []byte("{}"), 0o600))
		benchPlan(b, f)
	})
	b.Run("placeholders", func(b *testing.B) {
		f := newFixture(b)
		os.Remove(f.ws + "/.git/commondir")
		os.RemoveAll(f.ws + "/.codex")
		benchPlan(b, f)
	})
}

func benchPlan(b *testing.B, f *fixture) {
	p, _ := agent.Lookup("claude")
	for i := 0; i < b.N; i++ {
		s, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, User: "ada", Cwd: f.ws, Session: "s"})
		if err != nil {
			b.Fatal(err)
		}
		sess, err := Prepare(f.home, "", pr)
		if err != nil {
			b.Fatal(err)
		}
		fs, _ := OpenBindSources(s)
		for _, x := range fs {
			x.Close()
		}
		sess.Finish()
	}
}
