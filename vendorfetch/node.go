package vendorfetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/sysbin"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/rootonly"
)

// systemPath is where a Node named by command name is looked for, inside
// the target root: the system's PATH, not the caller's (sudo and cron
// differ, and a user's ~/bin must not pick what runs every session).
var systemPath = sysbin.Dirs

// jailHidden are the trees a jail does not show as the host has them
// (sandbox/plan.go): the homes, each replaced by an empty tmpfs, root's
// home, and the private /tmp, /run and /dev. A Node there is not there for
// the agent.
var jailHidden = []string{"/home", "/root", "/tmp", "/run", "/var/run", "/dev", "/proc", "/var/lib/cco"}

// needsNode says what pkg needs: "pkg needs Node.js >=20".
func needsNode(pkg, want string) string {
	return strings.TrimSpace(pkg + " needs Node.js " + want)
}

// nodeFix is the fix for every Node the step cannot use; key is the
// setting that names it (<agent>.node).
func nodeFix(key, want string) string {
	return strings.TrimSpace("install Node.js "+want) + " system-wide (apt-get install nodejs, or NodeSource's packages for a newer one) or set " + key + " to the path of one outside the homes"
}

// enginesNode is the engines.node range of a package.json or packument
// entry ("" when it has none).
func enginesNode(raw json.RawMessage) string {
	// engines is an object in every current package; old ones wrote an
	// array, which npm ignores too.
	var e map[string]string
	if len(raw) == 0 || json.Unmarshal(raw, &e) != nil {
		return ""
	}
	return strings.TrimSpace(e["node"])
}

// findNode is the target-system path of the Node that node (the setting
// key, <agent>.node) names, its links resolved: the file that a link to it
// reaches in every jail. pkg and want are for the messages.
func findNode(run *provision.View, key, node, pkg, want string) (string, error) {
	p := node
	if !strings.HasPrefix(node, "/") {
		p = ""
		for _, d := range systemPath {
			if fi, err := run.Root.Lstat(d + "/" + node); err == nil && !fi.IsDir() {
				p = d + "/" + node
				break
			}
		}
		if p == "" {
			return "", fmt.Errorf("%s, and there is no %q on the system PATH (%s): %s", needsNode(pkg, want), node, strings.Join(systemPath, ":"), nodeFix(key, want))
		}
	} else if _, err := run.Root.Lstat(p); err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", key, p, err, nodeFix(key, want))
	}
	resolved, err := resolveIn(run.Root, p)
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", key, p, err, nodeFix(key, want))
	}
	if d := hiddenTree(run.Root, resolved); d != "" {
		return "", fmt.Errorf("%s %s is %s, under %s, which the jail does not show (it gives every session an empty home and a private /tmp and /run): %s", key, p, resolved, d, nodeFix(key, want))
	}
	if err := rootsNode(run, key, key+" "+p, p); err != nil {
		return "", err
	}
	return resolved, nil
}

// unsafeNodeFix is the fix of a Node that someone but root can change;
// key is the setting that names it (<agent>.node).
func unsafeNodeFix(key string) string {
	return "make the file and each directory above it root's and writable by root alone (chown root:root, chmod go-w), or set " + key + " to a Node that is; then run `sudo cco-install`"
}

// unsafeNodeError is a Node that someone but root can change.
type unsafeNodeError struct{ msg, fix string }

func (e *unsafeNodeError) Error() string { return e.msg + " (fix: " + e.fix + ")" }

// rootsNode refuses a Node that someone but root can change (what names
// it: the <agent>.node key, or the link the vendor step made): the file,
// every directory above it and every link on the way (rootonly.Check). It
// runs for every user of the agent with their login: whoever can write it
// reads their tokens. Under --root an unprivileged staging's own uid counts
// as root's, since it owns the whole tree it stages. A Node that is not
// there is no business of this check (findNode and interpreterDrift say
// so).
func rootsNode(run *provision.View, key, what, p string) error {
	var re *rootonly.Error
	if err := rootonly.Check(run.Root.Dir(), p, 0, os.Geteuid()); errors.As(err, &re) {
		agentName, _, _ := strings.Cut(key, ".")
		return &unsafeNodeError{fmt.Sprintf("%s is not root's alone: %v: any user who can change it runs code as every %s user, with their login", what, re, agentName), unsafeNodeFix(key)}
	}
	return nil
}

// resolveIn follows target's links inside the root and names the file they
// end at, as a target-system path.
func resolveIn(root provision.FileReader, target string) (string, error) {
	f, err := root.Open(target)
	if err != nil {
		return "", err
	}
	defer f.Close()
	host, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return "", err
	}
	if root.Dir() == "/" {
		return host, nil
	}
	rel, ok := strings.CutPrefix(host, root.Dir()+"/")
	if !ok {
		return "", fmt.Errorf("it resolves to %s, outside the root %s", host, root.Dir())
	}
	return "/" + rel, nil
}

// hiddenTree is the tree of jailHidden, or the home of a regular account,
// that p lies in ("" when none): what the jail hides of the host.
func hiddenTree(root provision.FileReader, p string) string {
	trees := jailHidden
	users, _ := provision.Users(root)
	for _, u := range users {
		if u.UID >= 1000 && u.UID < 65534 && path.IsAbs(u.Home) && path.Clean(u.Home) != "/" {
			trees = append(trees, path.Clean(u.Home))
		}
	}
	for _, d := range trees {
		if p == d || strings.HasPrefix(p, d+"/") {
			return d
		}
	}
	return ""
}

// checkNode finds the Node binary the setting key (<agent>.node) names and
// checks its version against want, the package's engines.node. It returns
// the binary's path on the target system, links resolved.
func checkNode(run *provision.View, key, node, pkg, want string) (string, error) {
	fix := nodeFix(key, want)
	p, err := findNode(run, key, node, pkg, want)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(run.Ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, run.Root.HostPath(p), "--version")
	cmd.Env = []string{"PATH=" + strings.Join(systemPath, ":")}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s --version failed (%v): %s", run.Root.HostPath(p), err, fix)
	}
	got := strings.TrimSpace(string(out))
	v, err := semver.NewVersion(strings.TrimPrefix(got, "v"))
	if err != nil {
		return "", fmt.Errorf("%s --version printed %q, not a Node version: %s", run.Root.HostPath(p), got, fix)
	}
	if want == "" {
		return p, nil
	}
	c, err := semver.NewConstraint(want)
	if err != nil {
		// npm does not enforce an engines range it cannot read either.
		return p, nil
	}
	if !c.Check(v) {
		return "", fmt.Errorf("%s, but %s is %s: %s", needsNode(pkg, want), p, got, fix)
	}
	return p, nil
}

// linkInterpreter makes the link name in the staged version directory
// (sgd's "version") to node: the jail runs the agent's script with it.
func linkInterpreter(sgd *staging, name, node string) error {
	err := unix.Symlinkat(node, int(sgd.dir.Fd()), "version/"+name)
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("the package has its own %s, where cco links the interpreter: refusing it", name)
	}
	if err != nil {
		return fmt.Errorf("linking %s to %s in %s: %w", name, node, sgd.dir.Name(), err)
	}
	return nil
}

// interpreterDrift says why version's interpreter link is not the Node that
// <agent>.node names now ("" when it is): Node was moved or removed, the
// key changed, or the version was installed before cco made the link. Its
// error is an unsafeNodeError alone: the link, or the Node the key names,
// can be changed by someone but root.
func interpreterDrift(run *provision.View, cfg Config, a vendorAgent, version string) (string, error) {
	if a.interp == "" {
		return "", nil
	}
	link := a.dir + "/" + version + "/" + a.interp
	have, err := run.Root.Readlink(link)
	if errors.Is(err, fs.ErrNotExist) {
		return link + " is missing", nil
	}
	if err != nil {
		return err.Error(), nil
	}
	if err := rootsNode(run, a.name+".node", "the interpreter link "+link, link); err != nil {
		return "", err
	}
	key, node := a.name+".node", cfg.nodeOf(a.name)
	want, err := findNode(run, key, node, a.name+" "+version, "")
	var un *unsafeNodeError
	if errors.As(err, &un) {
		return "", err
	}
	if err != nil {
		return err.Error(), nil
	}
	if have != want {
		return fmt.Sprintf("%s points at %s, but %s (%s) is %s", link, have, key, node, want), nil
	}
	return "", nil
}

// UnsafeInterpreters checks the installed interpreter link of each of
// agents that the receipt records as installed: a finding for each Node
// that someone but root can change. Status asks it for the agents whose
// vendor steps do not run (installed by --upgrade NAME, not in agents).
func UnsafeInterpreters(run *provision.View, agents []string) []provision.Finding {
	var out []provision.Finding
	for _, name := range agents {
		a, ok := lookupAgent(name)
		if !ok || a.interp == "" {
			continue
		}
		st := loadState(run, a.step)
		if st == nil {
			continue
		}
		link := a.dir + "/" + st.Version + "/" + a.interp
		var un *unsafeNodeError
		if err := rootsNode(run, a.name+".node", "the interpreter link "+link, link); errors.As(err, &un) {
			out = append(out, provision.Finding{ID: a.step, Path: link, Detail: un.msg, Fix: un.fix})
		}
	}
	return out
}

// installedNode checks the Node that <agent>.node names against the
// installed version's own engines.node (its package.json, which the receipt
// vouches for): a link is made again without fetching anything.
func installedNode(run *provision.View, cfg Config, a vendorAgent, version string) (string, error) {
	pj := a.dir + "/" + version + "/" + a.pkgJSON
	b, err := run.Root.ReadFile(pj)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w (reinstall it: sudo cco-install --upgrade %s)", run.Root.HostPath(pj), err, a.name)
	}
	var doc struct {
		Name    string          `json:"name"`
		Engines json.RawMessage `json:"engines"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("%s does not parse: %v (reinstall it: sudo cco-install --upgrade %s)", run.Root.HostPath(pj), err, a.name)
	}
	return checkNode(run, a.name+".node", cfg.nodeOf(a.name), doc.Name+"@"+version, enginesNode(doc.Engines))
}

// relinkInterpreter points version's interpreter link at node, atomically,
// and records it.
func relinkInterpreter(run *provision.Run, a vendorAgent, version, node string) error {
	link := a.dir + "/" + version + "/" + a.interp
	if err := run.Root.Symlink(node, link); err != nil {
		return err
	}
	return run.Record(link, provision.KindLink, "", a.step)
}
