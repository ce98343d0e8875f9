package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
)

// The host's URL rewrites and CA files reach the jail's gitconfig, and
// nothing that runs a command does.
func TestGitconfigCarriesRewritesAndCA(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.MkdirAll(f.home+"/.config/git", 0o700))
	testenv.Must(t, os.WriteFile(f.home+"/.config/git/config", []byte("[url \"https://mirror.corp/gh/\"]\n\tinsteadOf = https://github.com/\n"), 0o600))
	testenv.Must(t, os.WriteFile(f.home+"/.gitconfig", []byte(`[user]
	name = Ada L
[url "git@git.corp:"] pushInsteadOf = https://git.corp/
[URL "ssh://x/"]
	InsteadOf = "https://x/" ; a comment
[http]
	sslCAInfo = ~/certs/corp.pem
	proxy = http://proxy
[http "https://git.corp/"]
	sslcainfo = /etc/ssl/corp-git.pem
[credential]
	helper = store
[alias]
	x = !touch /tmp/pwned
[core]
	sshCommand = touch /tmp/pwned
[url]
	insteadOf = https://nobase/
`), 0o600))
	g := string(Gitconfig(f.home, nil))
	for _, want := range []string{
		"[url \"https://mirror.corp/gh/\"]\n\tinsteadOf = \"https://github.com/\"\n",
		"[url \"git@git.corp:\"]\n\tpushInsteadOf = \"https://git.corp/\"\n",
		"[url \"ssh://x/\"]\n\tinsteadOf = \"https://x/\"\n",
		"[http]\n\tsslCAInfo = \"" + f.home + "/certs/corp.pem\"\n",
		"[http \"https://git.corp/\"]\n\tsslCAInfo = \"/etc/ssl/corp-git.pem\"\n",
	} {
		if !strings.Contains(g, want) {
			t.Errorf("the jail's gitconfig lacks %q:\n%s", want, g)
		}
	}
	for _, bad := range []string{"store", "pwned", "proxy", "nobase", "[credential]\n", "[alias]", "[core]"} {
		if strings.Contains(g, bad) {
			t.Errorf("the jail's gitconfig carries %q:\n%s", bad, g)
		}
	}
	if got := gitCAFiles(gitHostSettings(f.home)); !slices.Equal(got, []string{f.home + "/certs/corp.pem", "/etc/ssl/corp-git.pem"}) {
		t.Errorf("CA files %q", got)
	}
}

// The CA files a launch names (the environment's and git's) are readable
// in the jail: a file under the home is bound read-only at its path; one
// in a protected tree refuses the launch and changes nothing.
func TestPlanCompanyCA(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.MkdirAll(f.home+"/certs", 0o700))
	testenv.Must(t, os.WriteFile(f.home+"/certs/corp.pem", []byte("ca"), 0o600))
	testenv.Must(t, os.WriteFile(f.home+"/certs/git.pem", []byte("ca"), 0o600))
	testenv.Must(t, os.WriteFile(f.home+"/.gitconfig", []byte("[http]\n\tsslCAInfo = ~/certs/git.pem\n"), 0o600))
	s, _, _ := f.plan(t, "codex", 1000, nil, []string{"NODE_EXTRA_CA_CERTS=" + f.home + "/certs/corp.pem"})
	for _, p := range []string{f.home + "/certs/corp.pem", f.home + "/certs/git.pem"} {
		if !slices.ContainsFunc(s.ReadOnly, func(b Bind) bool { return b.Src == p && b.Dst == p && b.Data == nil }) {
			t.Errorf("%s is not bound read-only: %+v", p, s.ReadOnly)
		}
	}
	if !slices.Contains(s.Env, "NODE_EXTRA_CA_CERTS="+f.home+"/certs/corp.pem") {
		t.Errorf("env %q", s.Env)
	}
	testenv.Must(t, os.WriteFile(f.home+"/.ssh/ca.pem", []byte("ca"), 0o600))
	p := filepath.Join(f.home, ".ssh/ca.pem")
	for _, env := range [][]string{{"SSL_CERT_FILE=" + p}, {"SSL_CERT_DIR=/etc/ssl/certs:" + f.home + "/.ssh"}} {
		claude, _ := agent.Lookup("claude")
		l := &Launch{Profile: claude, Config: &Config{}, Home: f.home, User: "ada", UID: 1000, Cwd: f.ws, Environ: env}
		if _, _, err := Plan(l); err == nil || !strings.Contains(err.Error(), strings.Split(env[0], "=")[0]) || !strings.Contains(err.Error(), ".ssh") {
			t.Errorf("%q: %v, want a refusal naming the variable and the path", env, err)
		}
	}
}

// A CA where the jail shows the agent's own tree instead of the host's
// (the cache tree at ~/.cache, a cache's link) refuses the launch: a bind
// there would make a file in the agent's cache, or be covered.
func TestPlanCAInTheJailsOwnTrees(t *testing.T) {
	f := newFixture(t)
	claude, _ := agent.Lookup("claude")
	for _, rel := range []string{".cache/corp.pem", ".npm/corp.pem"} {
		p := filepath.Join(f.home, rel)
		testenv.Must(t, os.MkdirAll(filepath.Dir(p), 0o700))
		testenv.Must(t, os.WriteFile(p, []byte("ca"), 0o600))
		l := &Launch{Profile: claude, Config: &Config{}, Home: f.home, User: "ada", UID: 1000, Cwd: f.ws, Environ: []string{"NODE_EXTRA_CA_CERTS=" + p}}
		if _, _, err := Plan(l); err == nil || !strings.Contains(err.Error(), "NODE_EXTRA_CA_CERTS") {
			t.Errorf("%s: %v, want a refusal", rel, err)
		}
	}
}
