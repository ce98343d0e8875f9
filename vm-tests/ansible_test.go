package vmtests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
)

// collectionSource is the collection in the checkout.
func collectionSource() string {
	return filepath.Join(repo(), "ansible/ansible_collections/cco/agents")
}

var (
	collectionOnce sync.Once
	collectionDir  string
	collectionErr  error
	collectionTmp  string // removed by TestMain
)

// requireAnsible fails (in the vm-tests run) without the Debian packages the
// scenarios use: ansible-core for ansible-playbook, ansible-galaxy and
// ansible-test, and ansible for the ansible.posix.json callback and the
// community.general.chroot connection.
func requireAnsible(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		testenv.Missing(t, "ansible-playbook is not installed (apt-get install ansible-core ansible)")
	}
	for _, plugin := range [][]string{{"callback", "ansible.posix.json"}, {"connection", "community.general.chroot"}} {
		if out, err := exec.Command("ansible-doc", "-t", plugin[0], "--json", plugin[1]).CombinedOutput(); err != nil || !strings.Contains(string(out), plugin[1]) {
			testenv.Missing(t, "the "+plugin[0]+" plugin "+plugin[1]+" is missing (apt-get install ansible): "+strings.TrimSpace(string(out)))
		}
	}
}

// collection builds the collection's tarball with ansible-galaxy, as the
// release does, and installs it into a collections directory of its own:
// the scenarios run the artifact, not the checkout.
func collection(t *testing.T) string {
	t.Helper()
	requireAnsible(t)
	collectionOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cco-vm-collection-")
		if err != nil {
			collectionErr = err
			return
		}
		collectionTmp = dir
		out, err := exec.Command("ansible-galaxy", "collection", "build", "--output-path", dir, collectionSource()).CombinedOutput()
		if err != nil {
			collectionErr = fmt.Errorf("ansible-galaxy collection build: %v\n%s", err, out)
			return
		}
		tarballs, _ := filepath.Glob(filepath.Join(dir, "cco-agents-*.tar.gz"))
		if len(tarballs) != 1 {
			collectionErr = fmt.Errorf("ansible-galaxy built %v, want one cco-agents tarball\n%s", tarballs, out)
			return
		}
		collectionDir = filepath.Join(dir, "collections")
		out, err = exec.Command("ansible-galaxy", "collection", "install", "--offline", "-p", collectionDir, tarballs[0]).CombinedOutput()
		if err != nil {
			collectionErr = fmt.Errorf("ansible-galaxy collection install %s: %v\n%s", tarballs[0], err, out)
		}
	})
	if collectionErr != nil {
		t.Fatal(collectionErr)
	}
	return collectionDir
}

// taskResult is one host's result of one task, as the json callback prints it.
type taskResult map[string]any

func (r taskResult) flag(k string) bool { b, _ := r[k].(bool); return b }
func (r taskResult) text(k string) string {
	s, _ := r[k].(string)
	return s
}

// playRun is what one ansible-playbook run did.
type playRun struct {
	tasks []struct {
		name   string
		result taskResult
	}
	stats struct{ Changed, Failures, Unreachable int }
	out   string
}

// task returns the result of the last task whose name ends with suffix.
func (p *playRun) task(suffix string) taskResult {
	var r taskResult
	for _, t := range p.tasks {
		if strings.HasSuffix(t.name, suffix) {
			r = t.result
		}
	}
	return r
}

func (p *playRun) changedTasks() []string {
	var out []string
	for _, t := range p.tasks {
		if t.result.flag("changed") {
			out = append(out, t.name)
		}
	}
	return out
}

// playbook runs a playbook against the machine through Ansible's chroot
// connection, whose chroot command enters the machine's namespaces, with the
// installed collection and vars as extra variables.
func playbook(t *testing.T, m *Machine, collections, enter, book string, vars map[string]any, args ...string) *playRun {
	t.Helper()
	dir := t.TempDir()
	inv := filepath.Join(dir, "inventory")
	line := fmt.Sprintf("[cco]\n%s ansible_connection=community.general.chroot ansible_chroot_exe=%s ansible_python_interpreter=/usr/bin/python3\n", m.Root, enter)
	if err := os.WriteFile(inv, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	ev, _ := json.Marshal(vars)
	cmd := exec.CommandContext(ctxT(t), "ansible-playbook", append([]string{"-i", inv, "-e", string(ev), book}, args...)...)
	cmd.Env = append(os.Environ(), "ANSIBLE_COLLECTIONS_PATH="+collections, "ANSIBLE_STDOUT_CALLBACK=ansible.posix.json",
		"ANSIBLE_NOCOLOR=1", "ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"), "ANSIBLE_BECOME=false")
	out, err := cmd.Output()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("ansible-playbook: %v", err)
	}
	var doc struct {
		Plays []struct {
			Tasks []struct {
				Task  struct{ Name string } `json:"task"`
				Hosts map[string]taskResult `json:"hosts"`
			} `json:"tasks"`
		} `json:"plays"`
		Stats map[string]struct {
			Changed, Failures, Unreachable int
		} `json:"stats"`
	}
	if jerr := json.Unmarshal(out, &doc); jerr != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("ansible-playbook %s: not the json callback's output: %v\n%s\n%s", book, jerr, out, stderr)
	}
	p := &playRun{out: string(out)}
	for _, play := range doc.Plays {
		for _, task := range play.Tasks {
			for _, r := range task.Hosts {
				p.tasks = append(p.tasks, struct {
					name   string
					result taskResult
				}{task.Task.Name, r})
			}
		}
	}
	st := doc.Stats[m.Root]
	p.stats.Changed, p.stats.Failures, p.stats.Unreachable = st.Changed, st.Failures, st.Unreachable
	if st.Unreachable != 0 {
		t.Fatalf("ansible-playbook %s: the machine is unreachable\n%s", book, out)
	}
	return p
}

// writePlaybook writes a playbook of tasks for the cco group.
func writePlaybook(t *testing.T, tasks string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "play.yml")
	if err := os.WriteFile(p, []byte("- hosts: cco\n  gather_facts: false\n  tasks:\n"+tasks), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const provisionTask = " : Provision with cco-install"

// The collection against a fresh machine, through the example playbook:
// --check reports changes and writes nothing; the real run provisions
// (and writes install.toml, which enables the upgrade timer); a second run
// changes nothing; --check after a managed file is deleted reports it and
// still writes nothing; cco_status reports drift without failing unless
// asked; state=absent undoes it all, and a second one is ok (changed=0); a foreign requirements.toml ends in a
// failed task whose msg names the step, the path and the fix.
func TestCollection(t *testing.T) {
	b := packages(t)[newVersion]
	collections := collection(t)
	m := boot(t)
	enter := filepath.Join(t.TempDir(), "enter")
	if err := m.WriteEnter(enter); err != nil {
		t.Fatal(err)
	}
	site := filepath.Join(repo(), "examples/ansible/site.yml")
	vars := map[string]any{"cco_package_file": b.Deb, "cco_agents": []string{}}

	before := system(t, m)
	check := playbook(t, m, collections, enter, site, vars, "--check", "--diff")
	if check.stats.Failures != 0 {
		t.Fatalf("--check on a fresh host failed:\n%s", check.out)
	}
	if !check.task(provisionTask).flag("changed") || check.stats.Changed == 0 {
		t.Errorf("--check on a fresh host reported no change: %v", check.changedTasks())
	}
	assertClean(t, m, before)
	if read(t, m, "/usr/bin/cco-install") != nil {
		t.Error("--check installed the package")
	}

	first := playbook(t, m, collections, enter, site, vars)
	if first.stats.Failures != 0 {
		t.Fatalf("first run failed:\n%s", first.out)
	}
	if !first.task(provisionTask).flag("changed") {
		t.Errorf("first run: the provisioning task is not changed: %v", first.changedTasks())
	}
	assertProvisioned(t, m, b)
	if got := string(read(t, m, "/etc/cco/install.toml")); !strings.Contains(got, "agents = []\n") || !strings.Contains(got, "auto_upgrade = true\n") {
		t.Errorf("install.toml does not carry the play's variables:\n%s", got)
	}
	if l, err := os.Readlink(filepath.Join(m.Root, "/etc/systemd/system/timers.target.wants/cco-upgrade.timer")); err != nil || l != "/usr/lib/systemd/system/cco-upgrade.timer" {
		t.Errorf("cco_auto_upgrade: true did not enable the timer: %q %v", l, err)
	}
	// What the role wrote is what a later cco-install on the host reads.
	if r := must(t, m, Root, "/", nil, "cco-install", "config"); !strings.Contains(r.Stdout, "file /etc/cco/install.toml") {
		t.Errorf("cco-install config does not read the role's install.toml:\n%s", r.Stdout)
	}

	second := playbook(t, m, collections, enter, site, vars)
	if second.stats.Failures != 0 || second.stats.Changed != 0 {
		t.Errorf("second run: %d failed, %d changed: %v\n%s", second.stats.Failures, second.stats.Changed, second.changedTasks(), second.out)
	}

	t.Run("jail verified", func(t *testing.T) {
		skipIfStandIn(t)
		putFakeVendors(t, m)
		strict := map[string]any{"cco_package_file": b.Deb, "cco_agents": []string{}, "cco_require_verified": true}
		ok := playbook(t, m, collections, enter, site, strict)
		r := ok.task(provisionTask)
		if ok.stats.Failures != 0 || r["cco_jail_verified"] != true {
			t.Fatalf("cco_require_verified on a sound host: failures %d, cco_jail_verified %v, cco_jail_failed %v\n%s", ok.stats.Failures, r["cco_jail_verified"], r["cco_jail_failed"], ok.out)
		}
		// The operator's escape hatch lets an unwrapped agent's prompts
		// through: the guard check fails, and so does the strict play.
		hatch := filepath.Join(m.Root, "/etc/cco/allow-unwrapped")
		if err := os.WriteFile(hatch, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(hatch)
		bad := playbook(t, m, collections, enter, site, strict)
		r = bad.task(provisionTask)
		if !r.flag("failed") || r["cco_jail_verified"] != false || !strings.Contains(fmt.Sprint(r["cco_jail_failed"]), "guard.outside") {
			t.Fatalf("a tampered host passed cco_require_verified: %v\n%s", r, bad.out)
		}
		if msg := r.text("msg"); !strings.Contains(msg, "guard.outside") || !strings.Contains(msg, "fix:") {
			t.Errorf("the failed verify's msg names no check and fix: %q", msg)
		}
		loose := playbook(t, m, collections, enter, site, vars)
		if loose.stats.Failures != 0 || loose.task(provisionTask)["cco_jail_verified"] != false {
			t.Errorf("without cco_require_verified the verdict is reported, not a failure: %v\n%s", loose.task(provisionTask), loose.out)
		}
	})

	if err := os.Remove(filepath.Join(m.Root, "/usr/local/bin/codex")); err != nil {
		t.Fatal(err)
	}
	drift := playbook(t, m, collections, enter, site, vars, "--check")
	if !drift.task(provisionTask).flag("changed") {
		t.Errorf("--check after removing /usr/local/bin/codex reported ok: %v", drift.changedTasks())
	}
	report, _ := drift.task(provisionTask)["report"].(map[string]any)
	if report == nil || report["dry_run"] != true || !strings.Contains(fmt.Sprint(report["steps"]), "/usr/local/bin/codex") {
		t.Errorf("the check run's report is not cco-install's dry run naming /usr/local/bin/codex: %v", report)
	}
	if read(t, m, "/usr/local/bin/codex") != nil {
		t.Error("--check put /usr/local/bin/codex back")
	}

	status := playbook(t, m, collections, enter, writePlaybook(t, `    - name: gather
      cco.agents.cco_status:
    - name: strict
      cco.agents.cco_status:
        fail_on_drift: true
`), nil)
	gather, strict := status.task("gather"), status.task("strict")
	if gather.flag("failed") || gather.flag("changed") || gather["in_sync"] != false {
		t.Errorf("cco_status with drift: failed %v, changed %v, in_sync %v: %s", gather.flag("failed"), gather.flag("changed"), gather["in_sync"], gather.text("msg"))
	}
	if !strict.flag("failed") || !strings.Contains(strict.text("msg"), "/usr/local/bin/codex") {
		t.Errorf("cco_status fail_on_drift: failed %v, msg %q", strict.flag("failed"), strict.text("msg"))
	}

	absent := playbook(t, m, collections, enter, writePlaybook(t, "    - name: absent\n      cco.agents.cco_install:\n        state: absent\n"), nil)
	if r := absent.task("absent"); r.flag("failed") || !r.flag("changed") {
		t.Errorf("state=absent: %v\n%s", r, absent.out)
	}
	assertNotProvisioned(t, m)
	if _, err := os.Lstat(filepath.Join(m.Root, "/etc/systemd/system/timers.target.wants/cco-upgrade.timer")); err == nil {
		t.Error("state=absent left the timer enabled")
	}
	// Uninstall is idempotent: a second state=absent finds nothing to
	// undo and reports ok (changed=0).
	again := playbook(t, m, collections, enter, writePlaybook(t, "    - name: absent again\n      cco.agents.cco_install:\n        state: absent\n"), nil)
	if r := again.task("absent again"); r.flag("failed") || r.flag("changed") || again.stats.Changed != 0 {
		t.Errorf("a second state=absent: failed %v, changed %v (play changed=%d), want ok\n%s", r.flag("failed"), r.flag("changed"), again.stats.Changed, again.out)
	}
	if report, _ := again.task("absent again")["report"].(map[string]any); !strings.Contains(fmt.Sprint(report["steps"]), "nothing to uninstall") {
		t.Errorf("the second state=absent's report does not say nothing to uninstall: %v", report)
	}

	// A site's own requirements.toml, which cco never overwrites.
	const foreign = "/etc/codex/requirements.toml"
	if err := os.MkdirAll(filepath.Join(m.Root, "/etc/codex"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Root, foreign), []byte("approval_policy = \"on-request\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conflict := playbook(t, m, collections, enter, site, vars)
	r := conflict.task(provisionTask)
	msg := r.text("msg")
	if !r.flag("failed") {
		t.Fatalf("a foreign %s did not fail the provisioning task:\n%s", foreign, conflict.out)
	}
	for _, want := range []string{"cco-install conflicts (exit 3)", "step policy.codex.requirements conflict", foreign, "merge the snippet below into it by hand"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the conflict's msg lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "{") {
		t.Errorf("the conflict's msg is a raw document:\n%s", msg)
	}
}

// The collection's sanity: ansible-test sanity runs every test that needs
// nothing from PyPI (this machine has no PyPI: validate-modules, pylint,
// pep8, yamllint, import, runtime-metadata and its ansible-doc test install
// their requirements with pip), and ansible-doc renders each module's
// documentation, which covers what validate-modules would parse.
func TestCollectionSanity(t *testing.T) {
	requireVM(t)
	requireAnsible(t)
	for _, module := range []string{"cco.agents.cco_install", "cco.agents.cco_status"} {
		cmd := exec.Command("ansible-doc", "--json", module)
		cmd.Env = append(os.Environ(), "ANSIBLE_COLLECTIONS_PATH="+filepath.Join(repo(), "ansible"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("ansible-doc %s: %v\n%s", module, err, out)
			continue
		}
		var doc map[string]struct {
			Doc    map[string]any `json:"doc"`
			Return map[string]any `json:"return"`
		}
		if err := json.Unmarshal(out, &doc); err != nil || doc[module].Doc["options"] == nil || doc[module].Return == nil {
			t.Errorf("ansible-doc %s: no options or return values (%v):\n%s", module, err, out)
		}
	}
	// ansible-test works on a collection under ansible_collections/NS/NAME;
	// a copy keeps its output out of the checkout.
	dst := filepath.Join(t.TempDir(), "ansible_collections/cco/agents")
	if out, err := exec.Command("mkdir", "-p", filepath.Dir(dst)).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := exec.Command("cp", "-r", collectionSource(), dst).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	// The Python Debian's ansible runs on; ansible-test would otherwise try
	// every version it knows of that some shim on PATH claims to have.
	py, err := exec.Command("/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		t.Fatalf("/usr/bin/python3: %v", err)
	}
	args := []string{"sanity", "--color", "no", "--python", strings.TrimSpace(string(py))}
	for _, test := range []string{"action-plugin-docs", "changelog", "compile", "empty-init", "future-import-boilerplate",
		"ignores", "line-endings", "metaclass-boilerplate", "no-assert", "no-basestring", "no-dict-iteritems",
		"no-dict-iterkeys", "no-dict-itervalues", "no-get-exception", "no-illegal-filenames", "no-main-display",
		"no-smart-quotes", "no-unicode-literals", "replace-urlopen", "shebang", "symlinks", "use-argspec-type-path", "use-compat-six"} {
		args = append(args, "--test", test)
	}
	cmd := exec.CommandContext(ctxT(t), "ansible-test", args...)
	cmd.Dir = dst
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("ansible-test %v: %v\n%s", args, err, out)
	}
}
