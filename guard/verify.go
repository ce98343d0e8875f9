package guard

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/sandbox"
)

// Test seams for the verifier's view of the process.
var (
	procDir = "/proc"
	environ = os.Environ
)

// check is one in-jail verification: every one is a handful of syscalls, so
// all of them together stay far under the second the agents' SessionStart
// budget allows.
type check struct {
	name string
	run  func(m *sandbox.Marker, env map[string]string) error
}

var checks = []check{
	{"read-only root", checkReadOnlyRoot},
	{"masks empty", checkMasks},
	{"other agent's login absent", checkOtherLogin},
	{"no host tokens in env", checkEnvTokens},
	{"CapEff 0", func(*sandbox.Marker, map[string]string) error { return wantStatus("CapEff", "0000000000000000") }},
	{"NoNewPrivs", func(*sandbox.Marker, map[string]string) error { return wantStatus("NoNewPrivs", "1") }},
	{"seccomp filter", func(*sandbox.Marker, map[string]string) error { return wantStatus("Seccomp", "2") }},
	{"pid namespace", checkPidNS},
	{"egress", checkEgress},
}

// verify is the SessionStart hook: it cannot block (neither agent lets it),
// so it tells the user, as a system message, what holds and what does not.
func verify(_ hookInput, agent string, stdout, _ io.Writer) int {
	m, err := probeJail()
	if err != nil {
		msg := "cco guard: WARNING: " + outsideReason(agent, err)
		if ok, _ := escapeHatch(); ok {
			msg += " " + AllowUnwrappedPath + " exists, so prompts are allowed: this agent is unconfined."
		} else {
			msg += " Every prompt will be blocked."
		}
		systemMessage(stdout, msg)
		return 0
	}
	systemMessage(stdout, jailReport(m))
	return 0
}

// jailReport runs every check and sums them up in one line.
func jailReport(m *sandbox.Marker) string {
	env := envMap()
	var failed []string
	for _, c := range checks {
		if err := c.run(m, env); err != nil {
			failed = append(failed, c.name+": "+err.Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Sprintf("cco guard: jail check FAILED (%d of %d): %s. The jail is weaker than configured: stop and run `sudo cco-install status`.",
			len(failed), len(checks), strings.Join(failed, "; "))
	}
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.name
	}
	return fmt.Sprintf("cco guard: inside a cco jail for %s (egress %s); verified: %s.", m.Agent, m.Egress, strings.Join(names, ", "))
}

func envMap() map[string]string {
	env := map[string]string{}
	for _, kv := range environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// checkReadOnlyRoot asks the mounts, not the permissions: an unprivileged
// user cannot write / anyway, but a read-write root would still let it
// write what it owns, and root (without capabilities) what root owns.
func checkReadOnlyRoot(*sandbox.Marker, map[string]string) error {
	for _, p := range []string{"/", "/usr", "/etc"} {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err != nil {
			return fmt.Errorf("statfs %s: %w", p, err)
		}
		if st.Flags&unix.ST_RDONLY == 0 {
			return fmt.Errorf("%s is on a read-write mount", p)
		}
	}
	return nil
}

// profile is the marker's agent's profile (nil for a name the table does
// not know: the checks then expect nothing of it).
func profile(m *sandbox.Marker) *agent.Profile {
	p, _ := agent.Lookup(m.Agent)
	return p
}

func home(env map[string]string) (string, error) {
	h := env["HOME"]
	if !filepath.IsAbs(h) {
		return "", fmt.Errorf("HOME is %q, not an absolute path", h)
	}
	return h, nil
}

func checkMasks(m *sandbox.Marker, env map[string]string) error {
	h, err := home(env)
	if err != nil {
		return err
	}
	p := profile(m)
	if p == nil {
		return fmt.Errorf("the marker names agent %q, which this guard does not know", m.Agent)
	}
	for _, rel := range p.Masks {
		p := filepath.Join(h, rel)
		ents, err := os.ReadDir(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", p, err)
		}
		if len(ents) > 0 {
			return fmt.Errorf("%s shows %d entries (%s...), not an empty mask", p, len(ents), ents[0].Name())
		}
	}
	return nil
}

func checkOtherLogin(m *sandbox.Marker, env map[string]string) error {
	h, err := home(env)
	if err != nil {
		return err
	}
	p := profile(m)
	if p == nil {
		return fmt.Errorf("the marker names agent %q, which this guard does not know", m.Agent)
	}
	for _, rel := range p.OthersSecrets() {
		p := filepath.Join(h, rel)
		if f, err := os.Open(p); err == nil {
			f.Close()
			return fmt.Errorf("%s is readable", p)
		}
	}
	return nil
}

// hostTokens are variables that carry host credentials or host sockets.
var hostTokens = []string{
	"SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO", "DBUS_SESSION_BUS_ADDRESS", "DOCKER_HOST",
	"GITHUB_TOKEN", "GH_TOKEN", "GITLAB_TOKEN", "GL_TOKEN", "NPM_TOKEN", "HF_TOKEN",
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS",
	"AZURE_CLIENT_SECRET", "VAULT_TOKEN",
}

// checkEnvTokens: the agent's own credential variables (its profile's
// Credentials) may be passed, and the agent's own variables for its
// children (ChildEnv) may be there; host tokens and every other agent's
// may not.
func checkEnvTokens(m *sandbox.Marker, env map[string]string) error {
	own := map[string]bool{}
	if p := profile(m); p != nil {
		for _, k := range slices.Concat(p.Credentials, p.ChildEnv, p.CloudEnv()) {
			own[k] = true
		}
	}
	var leaked []string
	for k := range env {
		if own[k] {
			continue
		}
		if isHostToken(k) {
			leaked = append(leaked, k) // names only: never echo a secret
		}
	}
	if len(leaked) > 0 {
		sort.Strings(leaked)
		return fmt.Errorf("%s set", strings.Join(leaked, ", "))
	}
	return nil
}

func isHostToken(k string) bool {
	for _, t := range hostTokens {
		if k == t {
			return true
		}
	}
	for _, p := range agent.All() {
		if slices.Contains(p.Credentials, k) {
			return true // another agent's: the caller skipped our own
		}
	}
	for _, suf := range []string{"_TOKEN", "_SECRET", "_PASSWORD", "_API_KEY"} {
		if strings.HasSuffix(k, suf) {
			return true
		}
	}
	return false
}

func wantStatus(key, want string) error {
	b, err := os.ReadFile(procDir + "/self/status")
	if err != nil {
		return err
	}
	got := statusField(b, key)
	if got != want {
		return fmt.Errorf("%s is %q, want %q", key, got, want)
	}
	return nil
}

func statusField(status []byte, key string) string {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// checkPidNS: in a jail with its own pid namespace, pid 1 is bwrap's init (or
// the helper, when it runs as pid 1); on a host it is the host's init.
func checkPidNS(*sandbox.Marker, map[string]string) error {
	b, err := os.ReadFile(procDir + "/1/comm")
	if err != nil {
		return fmt.Errorf("reading pid 1: %w", err)
	}
	switch c := strings.TrimSpace(string(b)); c {
	case "bwrap", "sandbox-helper":
		return nil
	default:
		return fmt.Errorf("pid 1 is %q: the jail shares a pid namespace", c)
	}
}

// checkEgress compares the marker's egress policy with the interfaces the
// jail sees: any policy but "host" means a private network with only lo.
func checkEgress(m *sandbox.Marker, _ map[string]string) error {
	switch m.Egress {
	case "host":
		return nil
	case "public", "allowlist", "off":
	default:
		return fmt.Errorf("the marker names egress %q, which this guard does not know", m.Egress)
	}
	b, err := os.ReadFile(procDir + "/self/net/dev")
	if err != nil {
		return fmt.Errorf("reading the network interfaces: %w", err)
	}
	var extra []string
	for _, line := range strings.Split(string(b), "\n") {
		name, _, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if ok && name != "lo" && !strings.Contains(name, "|") {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		return fmt.Errorf("egress is %q but the jail sees %s besides lo", m.Egress, strings.Join(extra, ", "))
	}
	return nil
}
