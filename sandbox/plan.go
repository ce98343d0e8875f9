package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/sandbox/caches"
	"github.com/cco-dev/cco/sandbox/egress/policy"
	"github.com/cco-dev/cco/sandbox/egress/spawn"
	"github.com/cco-dev/cco/sandbox/sshagent"
	"github.com/cco-dev/cco/sandbox/trust"
)

// SystemRoot prefixes every system path the shadow reads or runs (vendor
// binaries, the helper, sandbox.toml, bwrap). It is empty in production;
// only test binaries set it.
var SystemRoot = ""

// System paths, relative to SystemRoot.
const (
	HelperPath = "/usr/libexec/cco/sandbox-helper"
	BwrapPath  = "/usr/bin/bwrap"
	// ProxyPath is the egress proxy program (cmd/egress-proxy) the shadow
	// starts on the host.
	ProxyPath = "/usr/libexec/cco/egress-proxy"
)

// jailPath is the PATH inside: the shadow's /usr/local/bin first, so that a
// nested `claude` is the shadow again.
const jailPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

// Launch is what Plan needs to know about one launch.
type Launch struct {
	Profile *agent.Profile
	Config  *Config
	// Home, User and UID describe the invoking user.
	Home string
	User string
	UID  int
	// Cwd is the directory the agent was started in.
	Cwd string
	// Environ is the host environment (only the allow-list passes).
	Environ []string
	// Session names this launch in the marker.
	Session string
	// Args are the user's arguments.
	Args []string
	// Selftest starts cco's probe (`sandbox-helper selftest`, package
	// selftest) with Args in place of the vendor binary: the jail is the
	// agent's in every other respect (`cco-install verify`).
	Selftest bool
	// Direct makes the vendor binary bwrap's command, without the in-jail
	// helper: for a launch with no terminal and nothing else for the
	// helper to do (it saves a process start). It is ignored when a proxy
	// runs: the helper must then host the bridge.
	Direct bool
	// Egress is the policy mode (policy.ModePublic, ModeAllowlist or
	// ModeOff); "" means off, the closed default. The jail always gets its
	// own empty network namespace.
	Egress string
	// Engine is the jail engine that runs the Spec (sandbox/engine):
	// recorded in the marker.
	Engine string
	// EgressSocket is the host path of the proxy's listening socket, bound
	// at EgressSocket inside; required unless Egress is off.
	EgressSocket string
	// HostEndpoint makes the launcher own the agent's proxy endpoint
	// (spawn.Endpoint, in the jail's network namespace), carried to
	// EgressSocket on the host: no helper stays in the jail to host a
	// bridge. With Direct, the launcher makes the endpoint itself while
	// bwrap holds the agent (--block-fd); otherwise the helper makes it and
	// hands it back, then becomes the agent.
	HostEndpoint bool
	// HostPorts are the host loopback ports the jail reaches on its own
	// loopback (the egress policy's HostPorts): each gets a listener there
	// beside the endpoint's (docs/adr/0131-host-loopback-ports.md).
	HostPorts []int
	// SSHHosts, with ssh_agent on, are the hosts the jail's ssh reaches
	// (sandbox/sshagent); SSHAgentSocket is the user's agent socket, when
	// it is usable.
	SSHHosts       []string
	SSHAgentSocket string
	// JailConfig, when set, is the sandbox.toml the jail shows in place of
	// the host's (JailConfig: without the upstream proxy's credentials).
	JailConfig string
	// Stdin, Stdout and Stderr are the agent's (nil: this process's).
	Stdin, Stdout, Stderr *os.File
	// Messages is where Start and Wait write the launch's own lines
	// (notes, warnings, refusals); nil: Stderr through the one printer
	// (internal/safetext).
	Messages io.Writer
	// Terminal: Stdin and Stdout are the user's terminal, and the agent
	// gets a pty of its own (Spec.Terminal).
	Terminal bool
}

// Placeholder is a mount point the shadow creates on the host because a
// read-only bind must sit at a path that does not exist yet (bwrap would
// create it anyway, and leave it behind).
type Placeholder struct {
	Path string
	Dir  bool
	// Data is a placeholder file's content on the host ("": empty), for
	// a name whose empty file would mean something to a host program
	// (git reads an empty commondir as an error).
	Data string
	// Root is the top of the tree it is made in, resolved beneath
	// (package beneath): the outermost tree the plan knows that holds it.
	Root string
}

// Prep is the host-side work Plan decided on: done before bwrap starts.
// The jail's own files (the marker, the gitconfig, the stand-ins over
// placeholders) are not among it: bwrap makes them in memory from data the
// Spec carries, so a launch writes nothing for them on the host.
type Prep struct {
	// LoginDirs are created (mode 0700) when missing: the agent's own state.
	LoginDirs []string
	// Placeholders are created, recorded, and removed after the session.
	Placeholders []Placeholder
	// CarryOver are {from, to}: from is copied to to once, when to is missing.
	CarryOver [][2]string
	// Watched are state files whose command-bearing entries are compared
	// before and after the session.
	Watched []string
	// Trust are the agent's trust lists, put back after the session to
	// their values at launch (sandbox/trust).
	Trust []trust.List
	// Protected are the host paths bound read-only or onto themselves:
	// each must name the same inode after the session as at its start.
	Protected []string
	// Repos are the workspace's repositories (FindRepos), which the
	// post-session audit watches.
	Repos []string
	// AgentDirs are the subdirectories of the workspace that hold an
	// agent's project config or a file a host tool loads on its own
	// (workspace.Find), watched by the audit.
	AgentDirs []string
	// CacheDirs are the agent's cache tree and its directories, created
	// (mode 0700) when missing.
	CacheDirs []string
	// StandIns are login-state files and directories that the jail shows
	// read-only and that did not exist: made once, for good, so that no
	// session can create them.
	StandIns []Placeholder
	// Notes are one-line messages for the user: what this launch does
	// differently from what they may expect (no workspace, a variable
	// not passed).
	Notes []string
	// MountPoints are the host paths of the names bwrap resolves on the
	// host to mount onto, and Writable the host trees the jail writes:
	// recorded, so that another launch knows what this jail can swap
	// (docs/adr/0120-mount-points-on-descriptors.md).
	MountPoints []string
	Writable    []string
	// Sealed are the mount points below which the jail cannot change
	// the host (read-only directories, masks).
	Sealed []string
	// Workspace is the Spec's.
	Workspace string
}

// protectedSystem are trees no workspace or allow_write path may lie in
// or contain: the system's configuration and programs (the guard, the
// shadow, bwrap), cco's state, and the kernel's views.
var protectedSystem = []string{"/etc", "/usr", "/var/lib/cco", "/boot", "/proc", "/sys", "/dev"}

// protectedHome are the home's trees that hold credentials or cco's own
// bookkeeping (the user's own layer of sandbox.toml among it): every
// agent's login directories among them.
var protectedHome = append([]string{".ssh", ".aws", ".config/gcloud", ".gnupg", ".local/state/cco", caches.Root, userConfigDir}, agent.LoginDirs()...)

// Plan decides the jail for one launch: the Spec and the host-side work
// that must happen before bwrap runs. It reads the filesystem but changes
// nothing; every refusal says what to do.
func Plan(l *Launch) (*Spec, *Prep, error) {
	p := l.Profile
	home, err := realDir(l.Home, "home")
	if err != nil {
		return nil, nil, err
	}
	if home == "/" {
		return nil, nil, fmt.Errorf("the home is / (fix: set HOME to your home directory)")
	}
	shared := sharedTrees(l.Environ)
	ws, err := pickWorkspace(l, home, shared)
	noWorkspace := errors.Is(err, errHomeWorkspace)
	if err != nil && !noWorkspace {
		return nil, nil, err
	}
	s := &Spec{Home: home, Workspace: ws, Chdir: l.Cwd, Terminal: l.Terminal}
	if ws != "" {
		// The agent starts in the directory's real path (bwrap cannot
		// chdir through a link the jail does not show), or in the
		// shell's logical path where the jail can show it (logicalPWD).
		s.Chdir, _ = realDir(l.Cwd, "current directory")
	}
	pr := &Prep{}
	if noWorkspace {
		// The home is no project: the agent starts in an empty private
		// directory, and nothing of the home is writable but its login
		// state (--version, --help and logins work from ~ as unwrapped).
		s.Chdir, s.NoWorkspace = NoWorkspaceDir, NoWorkspaceDir
		pr.Notes = append(pr.Notes, fmt.Sprintf("%s is your home or holds it, not a project: %s starts with no workspace, in an empty private directory (cd into a project to work on it)", l.Cwd, p.Name))
	}

	if note := enclosingRepoNote(ws, home, p.Name); note != "" {
		pr.Notes = append(pr.Notes, note)
	}

	readOnly, why := readOnlyWorkspace(l, ws)
	if readOnly {
		// Nothing in it can change: none of the protections a writable
		// workspace needs (mount points, stand-ins, placeholders) is made.
		s.WorkspaceReadOnly = true
		pr.Notes = append(pr.Notes, why)
	}

	s.Private = privateDirs(l.Environ)

	// The profile's login state, read-write; everything else of the home
	// stays behind the tmpfs.
	for _, rel := range p.Login {
		d := filepath.Join(home, rel)
		pr.LoginDirs = append(pr.LoginDirs, d)
		s.HomeBinds = append(s.HomeBinds, Bind{Src: d, Dst: d})
	}
	pl := &planner{s: s, pr: pr, home: home, ws: ws, shared: shared, seen: map[string]bool{}, roDir: map[string]bool{},
		hostBound: pathsOf(s.HomeBinds), willExist: pr.LoginDirs}
	if ws != "" && !readOnly {
		pl.hostBound = append(pl.hostBound, ws)
	}
	for _, rel := range p.HomeReadOnly {
		if err := pl.loginReadOnly(rel); err != nil {
			return nil, nil, err
		}
	}
	tools, err := pl.toolchainTrees(l.Config.HomeTrees())
	if err != nil {
		return nil, nil, err
	}
	pl.cachePlaces(p.Name, l.Config.Caches, tools)
	apart := homeTreesApart(home, tools)
	if ws != "" {
		if err := refuseOverHomeTrees(ws, "workspace", apart, home); err != nil {
			return nil, nil, err
		}
	}
	s.HomeReadOnly = append(s.HomeReadOnly, Bind{Dst: filepath.Join(home, ".gitconfig"), Data: Gitconfig(home, l.Config.Forge)})
	vendor := SystemRoot + p.Binary
	if hb := filepath.Join(home, p.HomeBinary); p.HomeBinary != "" {
		// Inside a bound toolchain tree (~/.local/bin) the vendor's
		// conventional path needs a mount point there; without one it is
		// left out, since the tree is read-only.
		if _, err := os.Lstat(hb); err == nil || !under(hb, tools) {
			s.HomeReadOnly = append(s.HomeReadOnly, Bind{Src: vendor, Dst: hb, System: true})
		}
	}
	for _, f := range l.Config.Forge {
		d := filepath.Join(home, Forges[f].TokenDir)
		s.Writable = append(s.Writable, Bind{Src: d, Dst: d, Try: true})
		if fi, err := os.Lstat(d); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, nil, refuseLink(d)
		} else if err == nil && fi.IsDir() {
			// What the forge's CLI runs on the host (pager, editor,
			// browser, aliases) stays as the user wrote it.
			pl.hostBound = append(pl.hostBound, d)
			for _, rel := range Forges[f].HostRun {
				if err := pl.readOnly(filepath.Join(d, rel), guarded{}); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	for _, w := range l.Config.AllowWrite {
		w = filepath.Clean(w)
		if err := refuseTree(w, home, "allow_write entry", shared); err != nil {
			return nil, nil, err
		}
		if err := refuseOverHomeTrees(w, "allow_write entry", apart, home); err != nil {
			return nil, nil, err
		}
		s.Writable = append(s.Writable, Bind{Src: w, Dst: w, Try: true})
		pl.hostBound = append(pl.hostBound, w)
	}
	if ws != "" && !readOnly {
		if err := pl.protectWorkspace(); err != nil {
			return nil, nil, err
		}
	}
	if err := pl.hidden(l.Config); err != nil {
		return nil, nil, err
	}
	pl.sysView()
	hostBound := pl.hostBound

	for _, rel := range p.Masks {
		m := filepath.Join(home, rel)
		if under(m, hostBound) {
			if _, err := os.Lstat(m); errors.Is(err, fs.ErrNotExist) {
				pr.Placeholders = append(pr.Placeholders, Placeholder{Path: m, Dir: true})
			}
		}
		s.Masks = append(s.Masks, Mask{Path: m, Kind: MaskTmpfs})
	}
	if l.UID == 0 {
		s.Masks = append(s.Masks, rootMasks(home)...)
	}

	for _, c := range p.CarryOver {
		pr.CarryOver = append(pr.CarryOver, [2]string{filepath.Join(home, c[0]), filepath.Join(home, c[1])})
	}
	for _, w := range p.Watched {
		pr.Watched = append(pr.Watched, filepath.Join(home, w))
	}
	for _, tl := range p.Trust {
		// The agent's own trust dialog in the jail trusts the workspace:
		// that stays (sandbox/trust).
		var allow []string
		if !noWorkspace && ws != "" {
			allow = []string{ws}
		}
		pr.Trust = append(pr.Trust, trust.List{Agent: p.Name, Home: home, File: tl.File, Keys: tl.Keys, Allow: allow})
	}

	mode := l.Egress
	switch mode {
	case "":
		mode = policy.ModeOff
	case policy.ModeOff:
	case policy.ModePublic, policy.ModeAllowlist:
		if l.EgressSocket == "" {
			return nil, nil, fmt.Errorf("egress %q needs the proxy's socket, and none was given", mode)
		}
		if l.HostEndpoint {
			// The agent's endpoint is a listener in the jail's network
			// namespace; the socket stays bound for what speaks to the
			// proxy directly.
			s.Env = append(s.Env, spawn.ProxyEnv()...)
			s.HostPorts = l.HostPorts
			s.endpoint = endpointHelper
			if l.Direct {
				s.endpoint = endpointLauncher
			}
		}
		s.EgressSocket = l.EgressSocket
		if l.SSHHosts != nil {
			// ssh_agent: the jail's ssh config and the host's known
			// hosts, read-only; the agent's socket at a private path.
			known := filepath.Join(home, ".ssh/known_hosts")
			s.HomeReadOnly = append(s.HomeReadOnly,
				Bind{Dst: filepath.Join(home, ".ssh/config"), Data: []byte(sshagent.Config(SystemRoot+HelperPath, l.SSHHosts, known))},
				Bind{Src: known, Dst: known, Try: true})
			// git's ssh reads that config even where the password
			// database's home is not HOME.
			s.Env = append(s.Env, "GIT_SSH_COMMAND=ssh -F "+filepath.Join(home, ".ssh/config"))
			if l.SSHAgentSocket != "" {
				s.SSHAgentSocket = l.SSHAgentSocket
				s.Env = append(s.Env, "SSH_AUTH_SOCK="+sshagent.SocketPath)
			}
		}
		// Beside the socket are the user's other sessions' sockets (and
		// the shadow's own bookkeeping): hidden, where no private tmpfs
		// (/tmp's) covers them already.
		if d := filepath.Dir(l.EgressSocket); !under(d, s.Private) {
			s.Masks = append(s.Masks, Mask{Path: d, Kind: MaskDir})
		}
	default:
		return nil, nil, fmt.Errorf("egress %q is not one of public, allowlist, off (fix: correct egress in %s)", mode, ConfigPath)
	}
	if l.JailConfig != "" {
		s.ReadOnly = append(s.ReadOnly, Bind{Dst: SystemRoot + ConfigPath, Data: []byte(l.JailConfig)})
	}
	s.UnshareNet = true
	s.Private = append(s.Private, devShm)
	s.Masks = append(s.Masks, socketMasks(s)...)

	// The environment last: PATH keeps what the jail shows.
	path := jailPATH(s, l.Environ)
	env := []string{"HOME=" + home, "USER=" + l.User, "LOGNAME=" + l.User, "PATH=" + path,
		"SHELL=/bin/bash", "GIT_CONFIG_SYSTEM=/dev/null"}
	env = append(env, p.Env...)
	if p.ConfigDirEnv != "" {
		env = append(env, p.ConfigDirEnv+"="+filepath.Join(home, p.Login[0]))
	}
	own, dropped := agentEnv(p, l.Environ)
	env = append(env, own...)
	for _, kv := range allowedEnv(l.Environ, l.Config.PassEnv) {
		if k, _, _ := strings.Cut(kv, "="); !isOthersCredential(p, k) && !slices.Contains(env, kv) {
			env = append(env, kv)
		}
	}
	opts := agent.Options{SkipPermissions: l.Config.ClaudeSkipPermissions, Root: l.UID == 0}
	args := p.Args(l.Args, opts)
	env, set, err := pl.hostEnv(l, env, opts, args)
	if err != nil {
		return nil, nil, err
	}
	dropped = slices.DeleteFunc(dropped, func(k string) bool { return slices.Contains(set, k) })
	s.EtcProfile = loginProfile(path)
	s.Env = append(env, s.Env...)
	if ws != "" {
		// bwrap sets $PWD to the directory it changes into.
		if pwd := logicalPWD(s, l.Cwd); pwd != "" {
			s.Chdir = pwd
		}
	}
	if len(dropped) > 0 {
		pr.Notes = append(pr.Notes, fmt.Sprintf("not passing %s into %s's jail: %s another agent's login",
			agent.List(dropped, "and"), p.Name, pick(len(dropped) == 1, "it is", "they are")))
	}
	s.TmpfsSize = tmpfsSizes(s, l.Config.TmpfsSize.total(machineRAM()))
	s.MaxProcs = l.Config.MaxProcs
	if s.MaxProcs == 0 {
		s.MaxProcs = DefaultMaxProcs
	}
	direct := l.Direct && (mode == policy.ModeOff || l.HostEndpoint)
	if s.Marker, err = markerJSON(&Marker{Schema: MarkerSchema, Agent: p.Name, Session: l.Session, Workspace: ws, Egress: mode, Engine: l.Engine, Layers: layers(l.Engine)}); err != nil {
		return nil, nil, err
	}

	// The profile's interpreter, when it has one, runs the vendor's script.
	cmd := append(p.Command(SystemRoot), args...)
	if l.Selftest {
		cmd = append([]string{SystemRoot + HelperPath, "selftest", "--"}, l.Args...)
	}
	if direct {
		s.Command = cmd
	} else {
		s.Command = append([]string{SystemRoot + HelperPath, "exec", "--"}, cmd...)
	}
	pl.seal()
	pl.gitEnv(p)
	return s, pr, nil
}

func pathsOf(bs []Bind) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Dst
	}
	return out
}

// realDir resolves a directory's symlinks: bwrap cannot mount onto a link,
// and the refusals compare real paths.
func realDir(p, what string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("the %s %q is not an absolute path", what, p)
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("resolving the %s %s: %w", what, p, err)
	}
	fi, err := os.Stat(r)
	if err != nil {
		return "", fmt.Errorf("resolving the %s %s: %w", what, p, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("the %s %s is not a directory", what, p)
	}
	return r, nil
}

// readOnlyWorkspace decides whether the workspace is bound read-only, and
// the line that says why: it lies on a read-only mount (a reference
// checkout, a read-only share), where a writable workspace's protections
// could not be made and are not needed, or the agent's own arguments ask
// for a read-only one (codex -s read-only).
func readOnlyWorkspace(l *Launch, ws string) (bool, string) {
	if ws == "" {
		return false, ""
	}
	var st unix.Statfs_t
	if err := unix.Statfs(ws, &st); err == nil && st.Flags&unix.ST_RDONLY != 0 {
		return true, fmt.Sprintf("the workspace %s is on a read-only mount: %s sees it read-only, and nothing is created in it", ws, l.Profile.Name)
	}
	if !l.Selftest && l.Profile.ReadOnlyWorkspace(l.Args) {
		return true, fmt.Sprintf("%s's read-only sandbox mode: the workspace %s is read-only in the jail (%s's own sandbox is off, its approvals as you gave them)", l.Profile.Name, ws, l.Profile.Name)
	}
	return false, ""
}

// resolveHome makes the launch's home its real path: a home reached
// through a link (/home/u2 -> /srv/h/u2) is then the same path for every
// step of the launch (the registry, the caches, the jail's HOME), as Plan
// sees it. A home that does not resolve is left for Plan to refuse.
func resolveHome(l *Launch) {
	if r, err := filepath.EvalSymlinks(l.Home); err == nil && filepath.IsAbs(l.Home) {
		l.Home = r
	}
}

// logicalPWD is the directory the agent starts in, and so its $PWD, when the shell's logical
// path (logical, reached through a link) differs from the real one it
// starts in: that path where the jail shows it, else "". A link in the
// home, which the jail covers with its own tmpfs, is made there again
// (s.Links), pointing at its real target; a link elsewhere shows as the
// host has it, but in the private trees (/tmp, /run) and the masks.
func logicalPWD(s *Spec, logical string) string {
	logical = filepath.Clean(logical)
	if !filepath.IsAbs(logical) || logical == s.Chdir {
		return ""
	}
	link := ""
	for p := logical; p != "/"; p = filepath.Dir(p) {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			link = p // the last one met walking up is the first on the way down
		}
	}
	if link == "" || filepath.Dir(link) != mustReal(filepath.Dir(link)) {
		return ""
	}
	target, err := filepath.EvalSymlinks(link)
	if err != nil || filepath.Join(target, strings.TrimPrefix(logical, link)) != s.Chdir {
		return "" // more links past the first: not one the jail can show as one
	}
	for _, m := range s.Masks {
		if paths.Within(link, m.Path) {
			return ""
		}
	}
	if !paths.Within(link, s.Home) {
		if slices.ContainsFunc(s.Private, func(d string) bool { return paths.Within(link, d) }) {
			return ""
		}
		return logical
	}
	shown := false
	s.eachBind(func(b *Bind, _ bool) {
		if paths.Within(link, b.Dst) {
			shown = true // a bound tree shows the host's link
		}
	})
	if !shown {
		s.Links = append(s.Links, Link{Target: target, Path: link})
	}
	return logical
}

// mustReal is p's real path, or p.
func mustReal(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// pickWorkspace picks and checks the read-write directory.
func pickWorkspace(l *Launch, home string, shared []string) (string, error) {
	cwd, err := realDir(l.Cwd, "current directory")
	if err != nil {
		return "", err
	}
	ws := cwd
	if r := l.Config.WorkspaceRoot; r != "" {
		ws, err = realDir(r, "workspace_root")
		if err != nil {
			return "", fmt.Errorf("%w (fix: correct workspace_root in %s)", err, l.Config.entryFile("workspace_root", r))
		}
		if !paths.Within(cwd, ws) {
			return "", fmt.Errorf("the current directory %s is outside workspace_root %s (fix: cd %s, or change workspace_root in %s)", cwd, ws, shellQuote(ws), l.Config.entryFile("workspace_root", r))
		}
	}
	if paths.Within(home, ws) {
		return "", errHomeWorkspace
	}
	if err := refuseTree(ws, home, "workspace", shared); err != nil {
		return "", err
	}
	return ws, nil
}

// errHomeWorkspace is workspace's answer for the home or a directory that
// holds it: a launch there has no workspace.
var errHomeWorkspace = errors.New("the home is no workspace")

// NoWorkspaceDir is where, in the jail, a launch with no workspace starts:
// an empty directory in the private /tmp.
const NoWorkspaceDir = "/tmp/cco-no-workspace"

// refuseTree refuses a read-write path that is /, the home or an ancestor
// of it (it would uncover the home's tmpfs), that lies in or contains a
// protected tree or a shared scratch or runtime tree (other programs'
// sockets live there), or that is the top of a tree shared between
// projects.
func refuseTree(p, home, what string, shared []string) error {
	if p == "/" {
		return fmt.Errorf("refusing the %s /: it would make the whole system writable %s", what, refusalFix(what, p, "/", home, false))
	}
	if paths.Within(home, p) {
		return fmt.Errorf("refusing the %s %s: it is the home %s or contains it, and would uncover the home's credentials %s", what, p, home, refusalFix(what, p, home, home, false))
	}
	trees := append([]string{}, protectedSystem...)
	for _, h := range protectedHome {
		trees = append(trees, filepath.Join(home, h))
	}
	for _, t := range trees {
		if paths.Within(p, t) || paths.Within(t, p) {
			return fmt.Errorf("refusing the %s %s: it is in or contains the protected tree %s %s", what, p, t, refusalFix(what, p, t, home, false))
		}
	}
	for _, t := range shared {
		if paths.Within(p, t) || paths.Within(t, p) {
			return fmt.Errorf("refusing the %s %s: it is in or contains %s, a tree shared with other programs and their sockets %s", what, p, t, refusalFix(what, p, t, home, false))
		}
	}
	for _, t := range sharedTops {
		if p == t {
			return fmt.Errorf("refusing the %s %s: it is the top of a tree shared between projects (a project below it is fine) %s", what, p, refusalFix(what, p, t, home, true))
		}
	}
	return nil
}

// homeTreesApart are the home's trees the jail shows other than the host
// has them: the toolchain trees it binds read-only, and ~/.cache and each
// dependency cache's default place, which are the agent's own tree in the
// jail and the user's own on the host.
func homeTreesApart(home string, toolchains []string) []string {
	out := append([]string{filepath.Join(home, caches.Home)}, toolchains...)
	for _, c := range caches.Places {
		out = append(out, filepath.Join(home, c.Jail))
	}
	return out
}

// refuseOverHomeTrees refuses a read-write path (the workspace, an
// allow_write entry) that is, holds or lies in one of homeTreesApart: bound
// read-write after them, it would make a toolchain writable, or hand the
// session the host's own cache (~/go/pkg/mod), whose modules the user's go
// build compiles.
func refuseOverHomeTrees(p, what string, apart []string, home string) error {
	for _, t := range apart {
		if paths.Within(p, t) || paths.Within(t, p) {
			return fmt.Errorf("refusing the %s %s: it is in or holds %s, which the jail shows read-only or as the agent's own cache, never the host's to write %s", what, p, t, refusalFix(what, p, t, home, false))
		}
	}
	return nil
}

// refusalFix is what to do about the read-write path p, refused for the
// tree t, by what it is: each works when applied literally
// (cmd/shadow's TestRefusalFixesWork). A workspace in a refused tree is
// copied to the home, where it can be one (the message names the tree); one that holds a refused tree
// (or tops a shared one) gives way to a project below it. workspace_root
// is no way out: it must hold the current directory, so it would be
// refused for the same tree.
func refusalFix(what, p, t, home string, top bool) string {
	switch what {
	case "allow_write entry":
		return "(fix: remove " + p + " from allow_write in " + SystemRoot + ConfigPath + ")"
	case "git directory":
		return "(fix: keep the repository's git directory in the project, or launch elsewhere)"
	}
	if top {
		return "(fix: cd into a project directory below " + p + ", such as " + filepath.Join(p, "<project>") + ")"
	}
	if p == t || p == "/" {
		return "(fix: cd into a project directory, such as " + filepath.Join(home, "src", "<project>") + ")"
	}
	if paths.Within(t, p) {
		return "(fix: cd into a project directory below " + p + " that does not hold " + t + ", such as " + filepath.Join(p, "<project>") + ")"
	}
	dest := filepath.Join(home, filepath.Base(p))
	if _, err := os.Lstat(dest); err == nil || dest == p || paths.Within(dest, t) {
		dest = filepath.Join(home, "src", filepath.Base(p))
	}
	return "(fix: mkdir -p " + shellQuote(filepath.Dir(dest)) +
		" && cp -a " + shellQuote(p) + " " + shellQuote(dest) + " && cd " + shellQuote(dest) + ")"
}

// sharedTops are trees whose top holds many projects: a project below one
// is a workspace, the top is not.
var sharedTops = []string{"/srv", "/opt", "/mnt", "/media", "/home"}

// sharedTrees are the scratch and runtime trees that no workspace or
// allow_write path may lie in or contain: they hold other programs'
// sockets (tmux, ssh-agent, X11, the session bus) and files.
func sharedTrees(environ []string) []string {
	out := []string{"/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm"}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "XDG_RUNTIME_DIR="); ok && filepath.IsAbs(v) {
			if v = filepath.Clean(v); v != "/" {
				out = append(out, v)
			}
		}
	}
	return out
}

func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if paths.Within(p, d) && p != d {
			return true
		}
	}
	return false
}

// privateDirs are the host's scratch and socket-bearing directories, each
// given an empty tmpfs: /tmp, /var/tmp, /run, /var/run (each left out when
// it is a link, to /run or /tmp) and $XDG_RUNTIME_DIR. One below another is covered by it already
// (/run/user/1000 by /run): each mount costs bwrap a read of the whole
// mount table, so it gets none of its own.
func privateDirs(environ []string) []string {
	out := []string{"/tmp", "/run"}
	for _, d := range []string{"/var/tmp", "/var/run"} {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "XDG_RUNTIME_DIR="); ok && filepath.IsAbs(v) {
			if v = filepath.Clean(v); v != "/" && !slices.ContainsFunc(out, func(d string) bool { return paths.Within(v, d) }) {
				out = append(out, v)
			}
		}
	}
	return out
}

// rootMasks hide what root still owns without capabilities.
func rootMasks(home string) []Mask {
	var m []Mask
	for _, f := range []string{"/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/shadow-", "/etc/gshadow-"} {
		if _, err := os.Lstat(f); err == nil {
			m = append(m, Mask{Path: f, Kind: MaskFile})
		}
	}
	keys, _ := filepath.Glob("/etc/ssh/*_key")
	for _, k := range keys {
		m = append(m, Mask{Path: k, Kind: MaskFile})
	}
	for _, d := range []string{"/etc/sudoers.d", "/var/lib/cco", "/root"} {
		if d == home {
			continue
		}
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			m = append(m, Mask{Path: d, Kind: MaskDir})
		}
	}
	return m
}

// allowedEnv keeps the host variables that may enter the jail: the
// terminal's and the locale's, and sandbox.toml's pass_env.
func allowedEnv(environ, pass []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if k == "TERM" || k == "COLORTERM" || k == "LANG" || k == "TZ" || strings.HasPrefix(k, "LC_") {
			out = append(out, kv)
			continue
		}
		for _, n := range pass {
			if n == k && refusedEnv(k) == "" {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}

// refuseGitLink refuses a repository's .git that is a link. Its fix keeps
// the repository: the link becomes the gitdir file git itself writes for a
// separate git directory (git init --separate-git-dir), with the
// core.worktree that names the checkout back, which the jail follows and
// protects as a worktree's admin directory.
func refuseGitLink(g string) error {
	target, err := filepath.EvalSymlinks(g)
	if err != nil || !isGitDir(target) {
		return refuseLink(g) // no repository's admin directory: nothing to keep
	}
	checkout := filepath.Dir(g)
	return fmt.Errorf("%s is a symbolic link to %s, and the jail never binds what a link points to; a gitdir file in its place keeps the repository, which the jail protects (fix: git --git-dir=%s config core.worktree %s && rm %s && echo 'gitdir: %s' > %s)",
		g, target, shellQuote(target), shellQuote(checkout), shellQuote(g), target, shellQuote(g))
}

// isGitDir tells a repository's admin directory: a HEAD file and an
// objects directory.
func isGitDir(d string) bool {
	h, err := os.Lstat(filepath.Join(d, "HEAD"))
	o, oerr := os.Lstat(filepath.Join(d, "objects"))
	return err == nil && oerr == nil && h.Mode().IsRegular() && o.IsDir()
}

// shellQuote quotes p for a fix the user pastes into a shell.
func shellQuote(p string) string {
	if p != "" && !strings.ContainsAny(p, " \t\n'\"$`\\;&|<>()*?[]{}~#!") {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

// nameBackFix is the fix for a .git file whose directory does not name
// the checkout back. A separate git directory (git init
// --separate-git-dir, which modern git writes without core.worktree) is
// named back by setting core.worktree; a worktree's by git worktree
// repair; rm would cut such a checkout from its repository. A .git file
// naming a directory that is no repository at all (~/.ssh) is removed.
func nameBackFix(g, d string) string {
	if !isGitDir(d) {
		// It names no repository: the file is all there is to undo.
		return "(fix: rm " + shellQuote(g) + ")"
	}
	if _, err := os.Lstat(filepath.Join(d, "commondir")); err != nil {
		return fmt.Sprintf("(fix: git --git-dir=%s config core.worktree %s)", shellQuote(d), shellQuote(filepath.Dir(g)))
	}
	return "(fix: git worktree repair " + shellQuote(filepath.Dir(g)) + ", run in the main checkout)"
}

// enclosingRepoNote is the launch's line for a workspace that lies inside
// a git repository it does not hold (started in a subdirectory): that
// repository's .git is outside the workspace, so read-only in the jail,
// and a commit there fails. "" otherwise, and for the home's own
// repository (a dotfiles checkout), which no session is meant to commit to.
func enclosingRepoNote(ws, home, name string) string {
	if ws == "" {
		return ""
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git")); err == nil {
		return ""
	}
	top := repoTop(filepath.Dir(ws))
	if top == "" || paths.Within(home, top) {
		return ""
	}
	return fmt.Sprintf("%s lies inside the git repository %s, whose .git this jail shows read-only: git reads it there, but a commit fails (fix: start %s in %s for a session that commits)", ws, top, name, top)
}
