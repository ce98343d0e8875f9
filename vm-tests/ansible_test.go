package vmtests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
)

// playbook runs examples/ansible/site.yml against the machine through
// Ansible's chroot connection, whose chroot command enters the machine's
// namespaces, and returns each task's changed flag by task name.
func playbook(t *testing.T, m *Machine, deb, enter string) map[string]bool {
	t.Helper()
	dir := t.TempDir()
	inv := filepath.Join(dir, "inventory")
	line := fmt.Sprintf("[cco]\n%s ansible_connection=community.general.chroot ansible_chroot_exe=%s ansible_become=false ansible_python_interpreter=/usr/bin/python3\n", m.Root, enter)
	if err := os.WriteFile(inv, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := `{"cco_package_file": "` + deb + `", "cco_install_environment": {"CCO_AGENTS": ""}}`
	cmd := exec.CommandContext(ctxT(t), "ansible-playbook", "-i", inv, "-e", vars, filepath.Join(repo(), "examples/ansible/site.yml"))
	cmd.Env = append(os.Environ(), "ANSIBLE_STDOUT_CALLBACK=ansible.posix.json", "ANSIBLE_NOCOLOR=1",
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"), "ANSIBLE_HOST_KEY_CHECKING=False")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("ansible-playbook: %v\n%s\n%s", err, out, stderr)
	}
	var doc struct {
		Plays []struct {
			Tasks []struct {
				Task  struct{ Name string } `json:"task"`
				Hosts map[string]struct {
					Changed bool `json:"changed"`
					Skipped bool `json:"skipped"`
				} `json:"hosts"`
			} `json:"tasks"`
		} `json:"plays"`
		Stats map[string]struct {
			Changed, Failures, Unreachable int
		} `json:"stats"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("ansible-playbook output is not the json callback's: %v\n%s", err, out)
	}
	changed := map[string]bool{}
	for _, p := range doc.Plays {
		for _, task := range p.Tasks {
			for _, h := range task.Hosts {
				changed[task.Task.Name] = changed[task.Task.Name] || h.Changed
			}
		}
	}
	st := doc.Stats[m.Root]
	if st.Failures != 0 || st.Unreachable != 0 {
		t.Fatalf("ansible-playbook: %d failed, %d unreachable\n%s", st.Failures, st.Unreachable, out)
	}
	changed["(total)"] = st.Changed > 0
	return changed
}

// The Ansible example: the first run installs and provisions (changed), the
// second finds nothing to do (ok), and that verdict is cco-install's own.
func TestAnsibleRoleChangedThenOK(t *testing.T) {
	b := packages(t)[newVersion]
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		testenv.Missing(t, "ansible-playbook is not installed (apt-get install ansible)")
	}
	m := boot(t)
	enter := filepath.Join(t.TempDir(), "enter")
	if err := m.WriteEnter(enter); err != nil {
		t.Fatal(err)
	}
	first := playbook(t, m, b.Deb, enter)
	for _, task := range []string{"cco : Install the package file (deb)", "cco : Provision with cco-install", "(total)"} {
		if !first[task] {
			t.Errorf("first run: %q not changed (%v)", task, first)
		}
	}
	assertProvisioned(t, m, b)
	second := playbook(t, m, b.Deb, enter)
	for task, c := range second {
		if c {
			t.Errorf("second run: %q changed (%v)", task, second)
		}
	}
	// A change made behind Ansible's back is reported as changed again.
	if err := os.Remove(filepath.Join(m.Root, "/usr/local/bin/codex")); err != nil {
		t.Fatal(err)
	}
	if third := playbook(t, m, b.Deb, enter); !third["cco : Provision with cco-install"] {
		t.Errorf("after removing /usr/local/bin/codex the role reported ok: %v", third)
	}
	assertProvisioned(t, m, b)
}
