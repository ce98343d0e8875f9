package attack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/sandbox"
)

// TestUserLayerUnwritable: a session cannot write the user's own layer of
// sandbox.toml (~/.config/cco/sandbox.toml), which the next launch reads
// as that user's policy, whether it exists or not; the verdict is the
// file on the host after the session (and the suite's second launch).
func TestUserLayerUnwritable(t *testing.T) {
	const widening = `pass_env = ["SSH_AUTH_SOCK"]\negress = "public"\n`
	plant := func(w *world, _ string) probe {
		return probe{Steps: steps(
			"write the layer", "mkdir -p ~/.config/cco && printf '"+widening+"' > ~/.config/cco/sandbox.toml && echo DONE",
			"replace the layer", "printf '"+widening+"' > ~/.config/cco/x && mv ~/.config/cco/x ~/.config/cco/sandbox.toml && echo DONE",
			"link the layer", "ln -sf /tmp/evil ~/.config/cco/sandbox.toml && echo DONE")}
	}
	layer := func(w *world) string { return filepath.Join(w.Home, sandbox.UserConfigRel) }
	unchanged := func(want string) func(t *testing.T, w *world, agent string, sess jailtest.Result) {
		return func(t *testing.T, w *world, agent string, sess jailtest.Result) {
			refuses(map[string]string{"write the layer": "writing the user's layer", "replace the layer": "replacing it",
				"link the layer": "linking it"})(t, w, agent, sess)
			b, err := os.ReadFile(layer(w))
			if want == "" && !os.IsNotExist(err) || want != "" && string(b) != want {
				t.Errorf("the user's layer on the host after the session: %q, %v (want %q)", b, err, want)
			}
		}
	}
	runAttacks(t, []attack{
		{name: "write a missing user layer", probe: plant, check: unchanged("")},
		{
			name: "rewrite the user layer",
			prep: func(t *testing.T, w *world) {
				p := layer(w)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("egress = \"off\"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				for _, q := range []string{filepath.Join(w.Home, ".config"), filepath.Dir(p), p} {
					os.Lchown(q, w.U.UID, w.U.GID)
				}
			},
			probe: plant,
			check: unchanged("egress = \"off\"\n"),
		},
	})
}
