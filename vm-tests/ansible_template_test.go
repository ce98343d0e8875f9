package vmtests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox"
)

// The role's sandbox.toml, rendered by Ansible's own template module: an
// empty cco_egress_allow writes no egress_allow, so allowlist mode keeps
// the shipped list; a list is written as it is. The shadow's loader reads
// both. No machine image is needed: this runs without CCO_VM_TESTS.
func TestAnsibleSandboxTomlEmptyAllowKeepsShippedList(t *testing.T) {
	testenv.RequireRoot(t)
	requireAnsible(t)
	tpl := filepath.Join(collectionSource(), "roles/install/templates/sandbox.toml.j2")
	for _, c := range []struct {
		allow []string
		want  []string
	}{
		{[]string{}, nil},
		{[]string{"api.anthropic.com", "*.corp.example"}, []string{"api.anthropic.com", "*.corp.example"}},
	} {
		dest := filepath.Join(t.TempDir(), "sandbox.toml")
		vars, _ := json.Marshal(map[string]any{"cco_egress": "allowlist", "cco_egress_allow": c.allow, "cco_allow_host": []string{},
			"cco_egress_ports": []int{80, 443}, "cco_sandbox_config": map[string]any{}})
		cmd := exec.Command("ansible", "localhost", "-c", "local", "-i", "localhost,", "-m", "ansible.builtin.template",
			"-a", "src="+tpl+" dest="+dest+" mode=0644", "-e", string(vars))
		cmd.Env = append(os.Environ(), "ANSIBLE_LOCALHOST_WARNING=false", "ANSIBLE_INVENTORY_UNPARSED_WARNING=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ansible template: %v\n%s", err, out)
		}
		cfg, err := sandbox.LoadConfig(dest)
		if err != nil {
			b, _ := os.ReadFile(dest)
			t.Fatalf("the rendered sandbox.toml: %v\n%s", err, b)
		}
		if cfg.Egress != "allowlist" || !slices.Equal(cfg.EgressAllow, c.want) || (c.want == nil) != (cfg.EgressAllow == nil) {
			b, _ := os.ReadFile(dest)
			t.Errorf("cco_egress_allow %q: egress %q, egress_allow %q (set: %v), want %q\n%s", c.allow, cfg.Egress, cfg.EgressAllow, cfg.EgressAllow != nil, c.want, b)
		}
	}
}
