package attack

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/internal/testenv"
)

// attack is one class of attack: what the probe does in the jail, and how
// the host judges it afterwards.
type attack struct {
	name string
	// only, when set, limits the class to some agents and users.
	only func(agent string, u jailtest.RunAs) bool
	// config is sandbox.toml for the class ("": none).
	config func(w *world) string
	// prep changes the world on the host before the session.
	prep func(t *testing.T, w *world)
	// dir is where the session starts; nil: the workspace.
	dir   func(w *world) string
	probe func(w *world, agent string) probe
	// verdict adjusts the host's verdict; nil: the default.
	verdict func(w *world) verdict
	// serial keeps other sessions from running beside this class's
	// (its host state would show in theirs).
	serial bool
	// check is the class's own assertions on the session.
	check func(t *testing.T, w *world, agent string, sess jailtest.Result)
	// everyAgent runs the class for every agent, not only the
	// representative ones: its outcome depends on the profile.
	everyAgent bool
}

var (
	agents = agent.Names()
	users  = []jailtest.RunAs{jailtest.AsRoot, jailtest.AsNobody}
	// representative are the agents a class runs for unless it depends on
	// the profile (everyAgent). A jail differs from agent to agent only in
	// what its profile binds, masks and sets in the home, and in the
	// command it runs; the probe stands in for every vendor binary, and
	// the workspace's protection is the same in every jail (every
	// profile's entries, in each). These three cover each launch shape:
	// a config-dir variable, a home binary and a carried-over file
	// (claude), a masked package tree and the app-server (codex), an
	// interpreter (gemini). The classes about the home, the login state,
	// the tmpfs budget, a nested launch and the agents' project config run
	// for all seven; running every class for all seven would more than
	// double the suite's time (7.3 min on 2 cores for three agents).
	representative = []string{"claude", "codex", "gemini"}
)

func rootOnly(_ string, u jailtest.RunAs) bool { return u.UID == 0 }

// runAttacks runs each class for both agents, as root and as nobody, each
// in a world of its own, one session, then the host's verdict.
func runAttacks(t *testing.T, classes []attack) {
	testenv.RequireRoot(t)
	r := shared.Get(t)
	// A class with a sandbox.toml of its own changes the shared root, and
	// one with host sockets shows them to every jail: such lists run one
	// session at a time.
	parallel := true
	for _, a := range classes {
		parallel = parallel && a.config == nil && !a.serial
	}
	for _, a := range classes {
		t.Run(a.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			names := representative
			if a.everyAgent {
				names = agents
			}
			for _, agent := range names {
				for _, u := range users {
					if a.only != nil && !a.only(agent, u) {
						continue
					}
					t.Run(agent+"/"+u.Name, func(t *testing.T) {
						if parallel {
							t.Parallel()
						}
						w := newWorld(t, u)
						if a.config != nil {
							r.WithConfig(t, a.config(w))
						}
						if a.prep != nil {
							a.prep(t, w)
						}
						dir := w.ws
						if a.dir != nil {
							dir = a.dir(w)
						}
						var p probe
						if a.probe != nil {
							p = a.probe(w, agent)
						}
						sess := w.launch(t, r, agent, dir, p)
						t.Logf("session: exit %d\nstdout %s\nstderr %s", sess.Code, sess.Stdout, sess.Stderr)
						if a.check != nil {
							a.check(t, w, agent, sess)
						}
						var v verdict
						if a.verdict != nil {
							v = a.verdict(w)
						}
						w.judge(t, r, agent, dir, sess, v)
					})
				}
			}
		})
	}
}

// started fails the test unless the session ran the probe to its report.
func started(t *testing.T, sess jailtest.Result) {
	t.Helper()
	if sess.Code != 0 || sess.Report == nil {
		t.Fatalf("the session did not run the probe: exit %d\nstderr %s", sess.Code, sess.Stderr)
	}
}

// succeeded fails for each named step that did not exit 0 in the jail.
func succeeded(t *testing.T, sess jailtest.Result, names ...string) {
	t.Helper()
	started(t, sess)
	for _, n := range names {
		if got := sess.Report["sh:"+n]; !strings.HasPrefix(got, "exit 0:") {
			t.Errorf("in the jail, %s failed: %s", n, got)
		}
	}
}

// notDone fails for each step whose output has "done": the probe reached
// the end of an attack that must be refused.
func notDone(t *testing.T, sess jailtest.Result, what map[string]string) {
	t.Helper()
	for n, desc := range what {
		if strings.Contains(sess.Report["sh:"+n], "DONE") {
			t.Errorf("LEAK: in the jail, %s succeeded: %s", desc, sess.Report["sh:"+n])
		}
	}
}

// refuses is a class's check: the session ran, and none of the named
// steps (step name: what it attempts) got to its end.
func refuses(what map[string]string) func(t *testing.T, w *world, agent string, sess jailtest.Result) {
	return func(t *testing.T, w *world, _ string, sess jailtest.Result) {
		t.Helper()
		started(t, sess)
		notDone(t, sess, what)
	}
}

func steps(kv ...string) []step {
	var out []step
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, step{kv[i], kv[i+1]})
	}
	return out
}

func (w *world) claudeHooks(label string) string {
	return fmt.Sprintf(`{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":%q}]}]}}`, w.touch(label))
}

func (w *world) codexNotify(label string) string {
	return fmt.Sprintf("notify = [\"sh\", \"-c\", %q]\n", w.touch(label))
}
