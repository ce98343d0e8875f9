package sandbox

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/sandbox/cloudcreds"
	"github.com/cco-dev/cco/sandbox/hostenv"
	"github.com/cco-dev/cco/sandbox/saferead"
)

// jailView answers hostenv's questions about what the jail shows, once
// every bind and mask of the plan is decided.
type jailView struct {
	s    *Spec
	home string
	p    *agent.Profile
}

func (v jailView) Visible(p string) bool { return v.s.hostVisible(p) }

// Protected is the tree of protectedHome (but the agent's own login,
// which its jail shows), the other agent's login file, or the mask that
// holds p: a read-only bind there would show what the jail hides.
func (v jailView) Protected(p string) string {
	for _, h := range protectedHome {
		t := filepath.Join(v.home, h)
		if slices.Contains(v.p.Login, h) {
			continue
		}
		if paths.Within(p, t) {
			return t
		}
	}
	for _, sec := range v.p.OthersSecrets() {
		if t := filepath.Join(v.home, sec); paths.Within(p, t) {
			return t
		}
	}
	for _, m := range v.s.Masks {
		if paths.Within(p, m.Path) {
			return m.Path
		}
	}
	// Where the jail shows something else than the host (the agent's
	// cache tree at ~/.cache, a cache's link, a scratch tmpfs), a bind
	// would land in that other tree or be covered by it.
	other := ""
	v.s.eachBind(func(b *Bind, _ bool) {
		if other == "" && b.Src != b.Dst && paths.Within(p, b.Dst) {
			other = b.Dst
		}
	})
	if other != "" {
		return other
	}
	for _, l := range v.s.Links {
		if paths.Within(p, l.Path) {
			return l.Path
		}
	}
	for _, d := range v.s.Scratch {
		if paths.Within(p, d) {
			return d
		}
	}
	return ""
}

// Holds is a tree the jail hides that lies within the directory dir (a
// protected tree, the other agents' login files, a mask, a forge's token
// directory the jail does not show), or "": a read-only bind of dir would
// show it.
func (v jailView) Holds(dir string) string {
	var trees []string
	for _, h := range protectedHome {
		if !slices.Contains(v.p.Login, h) {
			trees = append(trees, filepath.Join(v.home, h))
		}
	}
	for _, sec := range v.p.OthersSecrets() {
		trees = append(trees, filepath.Join(v.home, sec))
	}
	for _, m := range v.s.Masks {
		trees = append(trees, m.Path)
	}
	for _, name := range slices.Sorted(maps.Keys(Forges)) {
		if t := filepath.Join(v.home, Forges[name].TokenDir); !v.Visible(t) {
			trees = append(trees, t)
		}
	}
	for _, t := range trees {
		if paths.Within(t, dir) {
			return t
		}
	}
	return ""
}

// hostEnv adds to the jail's environment env what the host gives this
// agent beyond the fixed allow-list, and binds read-only what it names:
// the company's CA (every jail), the agent's own settings variables, its
// cloud provider's credentials, and the variables its rewritten arguments
// need; the CA files the carried git settings name are made readable too.
// It returns the environment and the names of the variables it set that
// the host's other-agent filter would have dropped.
func (pl *planner) hostEnv(l *Launch, env []string, opts agent.Options, args []string) ([]string, []string, error) {
	p := l.Profile
	v := jailView{s: pl.s, home: pl.home, p: p}
	ca, files, err := hostenv.CA(l.Environ, v)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range gitCAFiles(gitHostSettings(pl.home)) {
		file, err := hostenv.Readable("http.sslCAInfo in ~/.gitconfig", f, v)
		if err != nil {
			return nil, nil, err
		}
		if file != nil && !slices.Contains(files, *file) {
			files = append(files, *file)
		}
	}
	for _, f := range files {
		pl.s.ReadOnly = append(pl.s.ReadOnly, Bind{Src: f.Src, Dst: f.Dst})
	}
	for _, kv := range ca {
		env = setEnv(env, kv)
	}
	for _, kv := range hostenv.Settings(p, l.Environ) {
		env = setEnv(env, kv)
	}
	creds, err := cloudcreds.Resolve(p, &cloudcreds.Host{Home: pl.home, Environ: l.Environ, Helper: SystemRoot + ProxyPath}, func(host string) (string, string, error) {
		return pl.adcFile(v, host)
	})
	if err != nil {
		return nil, nil, err
	}
	var set []string
	for _, f := range creds.Files {
		pl.s.ReadOnly = append(pl.s.ReadOnly, Bind{Src: f[0], Dst: f[1]})
	}
	for _, kv := range creds.Env {
		env = setEnv(env, kv)
		k, _, _ := strings.Cut(kv, "=")
		set = append(set, k)
	}
	pl.pr.Notes = append(pl.pr.Notes, creds.Notes...)
	for _, kv := range p.ArgsEnv(args, opts) {
		env = setEnv(env, kv)
	}
	return env, set, nil
}

// gitEnv sets in the jail's environment the git settings an agent whose
// shell drops git's config files needs (gitIdentityEnv). It runs once the
// plan is sealed, which makes the jail's excludes file.
func (pl *planner) gitEnv(p *agent.Profile) {
	excludes := filepath.Join(pl.home, gitExcludesRel)
	if !slices.ContainsFunc(pl.s.HomeReadOnly, func(b Bind) bool { return b.Dst == excludes && b.isData() }) {
		excludes = ""
	}
	for _, kv := range gitIdentityEnv(p, pl.home, pl.ws, excludes) {
		pl.s.Env = setEnv(pl.s.Env, kv)
	}
}

// adcFile makes the application default credentials file host readable in
// the jail: at its own path where the jail shows it or may bind it there,
// at cloudcreds.GoogleJailADC where it lies in a protected tree (gcloud's
// own ~/.config/gcloud among them, which stays hidden). Another agent's
// login file, ~/.ssh's and the like are refused.
func (pl *planner) adcFile(v jailView, host string) (jail, src string, err error) {
	real, err := filepath.EvalSymlinks(host)
	if err != nil {
		return "", "", fmt.Errorf("the application default credentials file %s: %w", host, err)
	}
	if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
		return "", "", fmt.Errorf("the application default credentials file %s is not a regular file", host)
	}
	gcloud := filepath.Join(pl.home, ".config/gcloud")
	for _, p := range []string{host, real} {
		if t := v.Protected(p); t != "" && t != gcloud {
			return "", "", &hostenv.Refusal{Var: "GOOGLE_APPLICATION_CREDENTIALS", Path: host, Tree: t}
		}
	}
	if v.Protected(host) == "" && v.Protected(real) == "" {
		f, err := hostenv.Readable("GOOGLE_APPLICATION_CREDENTIALS", host, v)
		if err != nil {
			return "", "", err
		}
		if f == nil {
			return host, "", nil
		}
		return f.Dst, f.Src, nil
	}
	return cloudcreds.GoogleJailADC, real, nil
}

// setEnv sets kv in env, replacing the key's earlier value.
func setEnv(env []string, kv string) []string {
	k, _, _ := strings.Cut(kv, "=")
	env = slices.DeleteFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") })
	return append(env, kv)
}

// gitIdentityEnv gives the user's git identity to an agent whose shell
// tool runs git without any config file (Gemini CLI's sets
// GIT_CONFIG_GLOBAL and GIT_CONFIG_SYSTEM to /dev/null and keeps only
// GIT_CONFIG_COUNT's entries, which it numbers its own after): there the
// identity is one of those entries, so that a commit has an author. Those
// entries win over a repository's own config, so the workspace's own
// user.name and user.email, where its .git/config sets them, are the ones
// given. The jail's excludes file (excludes, "" for none) is one of them
// too, so that git there lists none of cco's stand-ins either.
func gitIdentityEnv(p *agent.Profile, home, ws, excludes string) []string {
	if !p.ShellDropsGitConfig {
		return nil
	}
	name, email := hostGitIdentity(home)
	if ws != "" {
		if fi, err := os.Lstat(filepath.Join(ws, ".git", "config")); err == nil && fi.Mode().IsRegular() {
			n, e := gitIdentity(filepath.Join(ws, ".git", "config"))
			if n != "" {
				name = n
			}
			if e != "" {
				email = e
			}
		}
	}
	var keys, vals []string
	if name != "" {
		keys, vals = append(keys, "user.name"), append(vals, name)
	}
	if email != "" {
		keys, vals = append(keys, "user.email"), append(vals, email)
	}
	if excludes != "" {
		keys, vals = append(keys, "core.excludesFile"), append(vals, excludes)
	}
	if len(keys) == 0 {
		return nil
	}
	out := []string{fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(keys))}
	for i := range keys {
		out = append(out, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, keys[i]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, vals[i]))
	}
	return out
}

// loginProfile is the jail's /etc/profile: the host's, then lines that put
// the jail's PATH back first. A login shell (bash -l, sh -l, dash -l: Codex
// runs its commands in one) would otherwise start from the PATH the host's
// /etc/profile sets and lose /usr/local/go/bin and the toolchains under the
// home; what /etc/profile and profile.d add stays, after it. nil when the
// host has no /etc/profile to cover (a login shell then keeps PATH).
func loginProfile(jailPATH string) []byte {
	data, err := readRegular("/etc/profile")
	if err != nil {
		return nil
	}
	var b strings.Builder
	b.Write(data)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString("# cco: a login shell in the jail keeps the jail's PATH; what the lines above added follows it.\n")
	b.WriteString("_cco_added=$PATH\nPATH=" + shQuote(jailPATH) + "\n")
	b.WriteString("_cco_ifs=$IFS; IFS=:\n")
	b.WriteString("for _cco_d in $_cco_added; do case \":$PATH:\" in *\":$_cco_d:\"*) ;; *) PATH=$PATH:$_cco_d ;; esac; done\n")
	b.WriteString("IFS=$_cco_ifs; unset _cco_added _cco_ifs _cco_d; export PATH\n")
	return []byte(b.String())
}

// shQuote quotes s for a POSIX shell.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// readRegular reads a regular file through saferead, refusing anything
// else (a FIFO or device never holds the launch).
func readRegular(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New(path + " is not a regular file")
	}
	return saferead.ReadCapped(path)
}
