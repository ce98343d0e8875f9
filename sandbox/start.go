package sandbox

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/safetext"
	"github.com/cco-dev/cco/sandbox/appserver"
	"github.com/cco-dev/cco/sandbox/egress/policy"
	"github.com/cco-dev/cco/sandbox/egress/spawn"
	"github.com/cco-dev/cco/sandbox/engine"
	"github.com/cco-dev/cco/sandbox/keyring"
	"github.com/cco-dev/cco/sandbox/loginfwd"
	"github.com/cco-dev/cco/sandbox/pty"
	"github.com/cco-dev/cco/sandbox/saferead"
	"github.com/cco-dev/cco/sandbox/seccomp"
	"github.com/cco-dev/cco/sandbox/sshagent"
	"github.com/cco-dev/cco/sandbox/supervise"
)

// Exit codes of a launch that cannot go on, as a shell reports them.
const (
	ExitCannotRun = supervise.ExitCannotRun // the jail cannot be built
	ExitNotFound  = supervise.ExitNotFound  // the vendor binary is missing
)

// LaunchError is a launch that stops before its agent runs: Code is the
// launcher's exit status, and Msg says why, with the fix.
type LaunchError struct {
	Code int
	Msg  string
}

func (e *LaunchError) Error() string { return e.Msg }

// cannotBuild is the refusal of a jail that cannot be built.
func cannotBuild(err error) *LaunchError {
	return &LaunchError{Code: ExitCannotRun, Msg: "cannot build the jail: " + err.Error()}
}

// RootView starts root's jail in a remapped view of the host (package
// sandbox/rootview registers it, since it builds on this package): prepare
// readies the Spec and names the trees to map, start forks bwrap in the
// view.
type RootView struct {
	Applies func(euid int) bool
	Prepare func(s *Spec) (trees []string, err error)
	Start   func(bwrap string, argv []string, attr *syscall.ProcAttr, trees []string) (int, error)
	// Detach makes trees' idmapped copies as detached mounts, for cco's
	// own engine, whose child places them; ID is the host id 0 maps to.
	Detach func(trees []string) ([]int, error)
	ID     int
}

var rootView *RootView

// UseRootView registers root's view; a root launch without one refuses.
func UseRootView(v *RootView) { rootView = v }

// Start launches l's agent in its jail and returns the running session;
// Session.Wait ends it. It takes and releases the registry lock itself,
// and fills what l leaves zero from this process: the configuration, the
// invoking user, the directory, the environment, the session's name and
// the standard files.
//
// Every launch waits for it, so its order is chosen for speed: the egress
// proxy's audit log and socket are made as soon as the policy is known (the
// proxy process itself starts with the first connection), the jail's own
// files are handed to bwrap as data (nothing is written for them on the
// host), and nothing on the way to bwrap's start waits for another
// goroutine: on a small machine each such handoff can cost a millisecond.
func Start(l *Launch) (*Session, error) {
	p := l.Profile
	if l.Stdin == nil {
		l.Stdin, l.Stdout, l.Stderr = os.Stdin, os.Stdout, os.Stderr
	}
	if l.Messages == nil {
		l.Messages = safetext.Writer{W: l.Stderr}
	}
	userLayer := l.Config == nil
	if l.Config == nil {
		cfg, err := LoadConfig(SystemRoot + ConfigPath)
		if err != nil {
			return nil, cannotBuild(err)
		}
		l.Config = cfg
	}
	if err := p.Missing(SystemRoot); err != nil {
		return nil, &LaunchError{Code: ExitNotFound, Msg: err.Error()}
	}
	bwrap := SystemRoot + BwrapPath
	kind, err := chooseEngine(l)
	if err != nil {
		return nil, cannotBuild(err)
	}
	if _, err := os.Stat(bwrap); err != nil && kind == engine.Bwrap {
		return nil, cannotBuild(fmt.Errorf("bubblewrap is not installed at %s (fix: sudo apt-get install bubblewrap, or sudo dnf install bubblewrap)", bwrap))
	}
	euid := os.Geteuid()
	if euid == 0 && rootView == nil {
		return nil, cannotBuild(errors.New("this launcher was built without root's view (sandbox/rootview), so root's jail could read root-only files (fix: reinstall with sudo cco-install)"))
	}
	if l.Home == "" || l.User == "" {
		home, name, err := invoker()
		if err != nil {
			return nil, cannotBuild(err)
		}
		l.Home, l.User, l.UID = home, name, os.Getuid()
	}
	resolveHome(l)
	if userLayer {
		if err := applyUserLayer(l); err != nil {
			return nil, cannotBuild(err)
		}
	}
	if l.Environ == nil {
		l.Environ = os.Environ()
	}
	pol, err := EgressPolicy(l.Config, p.Name, l.Home, l.Environ)
	if err != nil {
		return nil, cannotBuild(err)
	}
	l.HostPorts = pol.HostPorts
	if raw, err := os.ReadFile(SystemRoot + ConfigPath); err == nil {
		if l.JailConfig, err = JailConfig(raw); err != nil {
			return nil, cannotBuild(err)
		}
	}
	if l.Session == "" {
		l.Session = sessionID()
	}
	r := &launched{name: p.Name, bwrap: bwrap, stderr: l.Messages, euid: euid, engine: kind}
	if pol.Mode == policy.ModeOff {
		fmt.Fprint(l.Messages, policy.OffBanner())
	} else if r.px, err = spawn.Start(SystemRoot+ProxyPath, pol, l.Session, saferead.ReadCapped); err != nil {
		return nil, &LaunchError{Code: ExitCannotRun, Msg: fmt.Sprintf("not starting %s: %v", p.Name, err)}
	}
	if pol.Mode != policy.ModeOff && l.Config.SSHAgent {
		l.SSHHosts = pol.SSHHosts
		sock := ""
		for _, kv := range l.Environ {
			if v, ok := strings.CutPrefix(kv, "SSH_AUTH_SOCK="); ok {
				sock = v
			}
		}
		if err := sshagent.CheckSocket(sock, os.Geteuid()); err != nil {
			fmt.Fprintf(l.Messages, "cco: %s\n", safetext.Escape(err.Error()))
			sock = ""
		}
		if sock != "" {
			// Beside the egress socket: the jail's private agent socket.
			relay := strings.TrimSuffix(r.px.Socket, ".sock") + ".ssh.sock"
			if r.sshRelay, err = sshagent.StartRelay(relay, sock); err != nil {
				r.stopProxy()
				return nil, cannotBuild(err)
			}
			l.SSHAgentSocket = relay
		}
	}
	s, err := r.plan(l, pol.Mode)
	if err != nil {
		r.stopProxy()
		return nil, err
	}
	if err := s.start(); err != nil {
		r.stopProxy()
		s.Finish()
		return nil, err
	}
	return s, nil
}

// launched is a Session's running side: what Start started and Wait ends.
type launched struct {
	name, bwrap string
	stderr      io.Writer
	euid        int
	engine      engine.Kind
	// opts are the jail's options, handed over on a descriptor (--args).
	opts     []string
	px       *spawn.Proxy    // nil with egress off
	sshRelay *sshagent.Relay // ssh_agent's socket for the jail, or nil
	helper   bool            // the agent starts through the in-jail helper
	spec     *Spec
	stdio    [3]*os.File
	don      *donation
	proc     *supervise.Process
	streams  *pty.Streams
	term     *pty.Terminal
	// login: the launch runs the agent's login flow, whose ports are then
	// carried in until the login state (its host path) changes.
	login      bool
	loginState string
	endKeyring func() // ends the thread that forked bwrap
	pid1       *jailPID
}

// jailPID is the jail's pid 1 on the host, once bwrap has reported it.
type jailPID struct {
	known chan struct{}
	pid   int
	// helperIsPID1: cco's engine replaced its child with the helper
	// (docs/adr/0147-one-program-in-the-jail.md).
	helperIsPID1 bool
}

func (j *jailPID) set(pid int) { j.pid = pid; close(j.known) }

// agentStopped tells whether the agent a terminal launch runs has really
// stopped, from the host's /proc: a stop message from the jail is only
// the jail's word (docs/explanation/terminal.md).
func (j *jailPID) agentStopped(foreground int) bool {
	select {
	case <-j.known:
	case <-time.After(time.Second):
		return false
	}
	return supervise.TerminalAgentStopped(j.pid, foreground, j.helperIsPID1)
}

// plan registers, plans and prepares under the home's registry lock: a
// session ending meanwhile keeps the placeholders this one will bind.
func (s *launched) plan(l *Launch, mode string) (*Session, error) {
	if l.Cwd == "" {
		cwd, err := os.Getwd()
		if err != nil {
			return nil, cannotBuild(fmt.Errorf("the current directory: %w", err))
		}
		l.Cwd = cwd
	}
	unlock, err := LockRegistry(l.Home)
	if err != nil {
		return nil, cannotBuild(err)
	}
	defer unlock()
	if err := Register(l.Home); err != nil {
		return nil, cannotBuild(err)
	}
	runtimeDir := ""
	if s.px != nil {
		l.EgressSocket, runtimeDir = s.px.Socket, s.px.Runtime
		l.HostEndpoint = true
	}
	l.Terminal = pty.IsTerminal(l.Stdin) && pty.IsTerminal(l.Stdout)
	s.helper = needsHelper(l)
	// The launcher enters the jail's network namespace itself where it
	// may (root); another user's helper makes the endpoint instead.
	l.Direct = !s.helper && (mode == policy.ModeOff || s.euid == 0)
	l.Egress = mode
	spec, prep, err := Plan(l)
	if err != nil {
		return nil, cannotBuild(err)
	}
	// The jail's pid 1 is cco's, not bwrap's (docs/adr/0110-jail-pid-1.md).
	// cco's own engine's child is that pid 1 already: sealed, reaping,
	// with the jail's environment alone.
	if s.engine != engine.CCO {
		spec.Init = []string{SystemRoot + HelperPath, "init", "--"}
	}
	sess, err := Prepare(l.Home, runtimeDir, prep)
	if err != nil {
		return nil, cannotBuild(err)
	}
	for _, n := range prep.Notes {
		fmt.Fprintf(l.Messages, "cco: %s\n", safetext.Escape(n))
	}
	s.spec, s.stdio = spec, [3]*os.File{l.Stdin, l.Stdout, l.Stderr}
	exists := func(rel string) bool { _, err := os.Lstat(filepath.Join(l.Home, rel)); return err == nil }
	if s.login = l.Profile.LoginFlow(l.Args, exists); s.login && l.Profile.LoginState != "" {
		s.loginState = filepath.Join(l.Home, l.Profile.LoginState)
	}
	sess.launched = s
	if !spec.WorkspaceReadOnly {
		// A read-only workspace cannot change: nothing in it to audit.
		sess.WatchRepos(spec.Workspace, prep.Repos, prep.AgentDirs)
	}
	return sess, nil
}

// nulJoined is args as bwrap's --args reads them: each ended by a NUL.
func nulJoined(args []string) []byte {
	n := 0
	for _, a := range args {
		n += len(a) + 1
	}
	b := make([]byte, 0, n)
	for _, a := range args {
		b = append(append(b, a...), 0)
	}
	return b
}

// needsHelper tells whether the agent must start through the in-jail
// helper: on a terminal (the fresh pty, and ^C reaching the agent rather
// than killing bwrap), for `codex agents` (the app-server), and for the
// proxy endpoint of a user who may not enter the jail's network namespace.
// Otherwise bwrap runs the vendor binary itself, one process start fewer.
func needsHelper(l *Launch) bool {
	for _, f := range []*os.File{l.Stdin, l.Stdout, l.Stderr} {
		if pty.IsTerminal(f) {
			return true
		}
	}
	if l.HostEndpoint && os.Geteuid() != 0 {
		return true
	}
	return l.Profile.AppServer && appserver.Applies(l.Profile.Args(l.Args, agent.Options{SkipPermissions: l.Config.ClaudeSkipPermissions}))
}

// start donates the jail's files and starts bwrap.
func (s *launched) start() error {
	prog, err := seccomp.Bytes()
	if err != nil {
		return cannotBuild(err)
	}
	// The masks of host sockets that went away since the plan drop.
	s.spec.DropVanishedSockets()
	var trees []string
	view := s.euid == 0 && rootView.Applies(0)
	if view {
		// Root's jail reads no root-only file (docs/adr/0018-root-view.md):
		// the view readies the Spec before its argv is written.
		if trees, err = rootView.Prepare(s.spec); err != nil {
			return cannotBuild(err)
		}
	}
	d := &donation{prog: prog, endpoint: s.spec.endpoint == endpointLauncher, helper: s.spec.endpoint == endpointHelper}
	if s.spec.Terminal {
		setup, err := pty.SetupOf(s.stdio[0], !pty.IsTerminal(s.stdio[2]))
		if err != nil {
			return cannotBuild(err)
		}
		d.setup = &setup
	}
	// bwrap reads its options from a pipe (--args): they hold the jail's
	// environment (--setenv), which its command line would show to every
	// user of the host.
	opts := s.spec.options(d)
	s.opts = opts
	argv := append([]string{s.bwrap, "--args", strconv.Itoa(d.dataFile(nulJoined(opts)))}, s.spec.command(d)...)
	if d.err != nil {
		d.abandon()
		return cannotBuild(d.err)
	}
	// No process in the jail holds the user's terminal (package pty).
	streams, err := pty.JailStreams(s.stdio[0], s.stdio[1], s.stdio[2], s.spec.Terminal)
	if err != nil {
		d.abandon()
		return cannotBuild(fmt.Errorf("the jail's standard streams: %w", err))
	}
	// syscall.ForkExec, not os/exec: os/exec makes a throw-away child once
	// per process to learn whether pidfds work, a process start that every
	// launch would pay for; the launcher needs only the pid.
	// bwrap in a process group of its own: the terminal's ^C and ^Z
	// reach the launcher, which passes them on, and never bwrap itself,
	// whose death would kill the jail.
	// bwrap gets no environment: the jail's comes from its arguments
	// (--clearenv, --setenv), and nothing of the launcher's is needed.
	attr := &syscall.ProcAttr{Env: []string{}, Files: d.fds([3]uintptr{streams.Child[0].Fd(), streams.Child[1].Fd(), streams.Child[2].Fd()}),
		Sys: &syscall.SysProcAttr{Setpgid: true}}
	var pid int
	// bwrap starts in a session keyring of its own, never the login's;
	// the thread that forks it lasts until bwrap has ended. The process
	// limit is lowered on that thread around the fork alone: the runtime
	// may start a thread for this goroutine meanwhile, which the lowered
	// limit could refuse.
	s.endKeyring, err = keyring.Fresh(func() error {
		return WithProcLimit(s.spec.MaxProcs, func() (err error) {
			pid, err = s.fork(argv, attr, trees, view)
			return err
		})
	})
	d.release()
	if err != nil {
		streams.Close()
		d.abandon()
		return cannotBuild(fmt.Errorf("starting %s: %w", s.program(), err))
	}
	streams.Started()
	s.streams = streams
	// cco's engine replaces its child with the helper's exec mode when
	// that is the command (sandbox/engine's pid1Argv).
	c := s.spec.Command
	s.pid1 = &jailPID{known: make(chan struct{}), helperIsPID1: s.engine == engine.CCO && len(c) > 1 && c[0] == SystemRoot+HelperPath && c[1] == "exec"}
	if d.ttyHost != nil {
		if s.term, err = pty.AttachChecked(d.ttyHost, s.stdio[0], s.stdio[1], s.pid1.agentStopped); err != nil {
			d.ttyHost.Close()
		}
	}
	s.don = d
	// bwrap's pidfd: the signals sent to it can never reach a process
	// that reused its pid after it was reaped.
	s.proc = supervise.Open(pid)
	return nil
}

// Wait supervises the session until the agent ends, then runs the
// post-session audit (its warnings go to the launch's standard error),
// undoes the launch's host-side work and returns the exit status.
func (s *Session) Wait() int {
	code := s.wait()
	if code == retryJail {
		if err := s.start(); err != nil {
			code = s.refuse(err)
		} else if code = s.wait(); code == retryJail {
			code = s.refuse(cannotBuild(errors.New("host sockets the jail masks keep going away while it is built (fix: launch again)")))
		}
	}
	s.stopProxy()
	// What the session reached, and what it was refused: one line, after
	// the agent, whatever the audit log keeps (docs/adr/0056-egress-audit-evidence.md).
	if s.px != nil {
		if line := s.px.Summary(); line != "" {
			fmt.Fprintln(s.stderr, line)
		}
	}
	for _, t := range s.Tampered() {
		fmt.Fprintf(s.stderr, "cco: WARNING: %s was replaced, moved or removed during the session: it is not the file the jail protected (check it before running git or %s there)\n", t, s.name)
	}
	for _, r := range s.RestoreTrust() {
		fmt.Fprintf(s.stderr, "cco: WARNING: %s\n", r)
	}
	for _, a := range s.Added() {
		fmt.Fprintf(s.stderr, "\ncco: WARNING: this session added a command that runs outside the jail:\n  %s\n  Remove it unless you added it yourself.\n", safetext.Escape(a))
	}
	s.Finish()
	return code
}

func (s *launched) refuse(err error) int {
	fmt.Fprintf(s.stderr, "cco: %s\n", safetext.Escape(err.Error()))
	var le *LaunchError
	if errors.As(err, &le) {
		return le.Code
	}
	return ExitCannotRun
}

// retryJail is wait's answer when the jail failed to build because a host
// socket it masks went away meanwhile (bwrap could not make its mount
// point): the launch builds it once more, without that mask.
const retryJail = -1

// wait supervises one bwrap. A proxy that cannot serve ends the session:
// bwrap is killed and the launch says why, 126.
func (s *launched) wait() int {
	d := s.don
	defer s.proc.Close()
	defer d.statusR.Close()
	j := &supervise.Jail{Proc: s.proc, Status: supervise.NewStatus(d.statusR), Started: s.pid1.set}
	if s.px != nil {
		s.px.Watch()
		j.Failed = s.px.Failed()
		if d.handbackR != nil {
			s.px.BridgeFrom(d.handbackR)
		}
		if d.blockW != nil {
			j.Up = func(pid int) error {
				defer d.blockW.Close()
				lns, err := spawn.ListenIn(pid, s.spec.HostPorts...)
				if err == nil {
					err = s.px.Bridge(lns...)
				}
				return err
			}
		}
	} else if d.blockW != nil {
		d.blockW.Close()
	}
	// The agent's login callback comes from the invoking user's browser on
	// the host's loopback, while its login flow runs and the jail listens on
	// a login port (docs/adr/0054-login-callback-forwarding.md).
	stopLogin := func() {}
	if p, ok := agent.Lookup(s.name); ok && s.login {
		up := j.Up
		j.Up = func(pid int) error {
			if up != nil {
				if err := up(pid); err != nil {
					return err
				}
			}
			stopLogin = loginfwd.Start(context.Background(), pid, p.LoginPorts, loginfwd.Options{
				Helper: SystemRoot + HelperPath, Warn: s.stderr, Agent: s.name, UID: os.Getuid(), State: s.loginState})
			return nil
		}
	}
	r := j.Wait()
	s.endKeyring()
	if s.term != nil {
		s.term.Close()
		s.term = nil
	}
	s.streams.Wait()
	stopLogin()
	if d.blockW != nil {
		d.blockW.Close()
	}
	var perr error
	if s.px != nil {
		perr = s.px.Verdict()
	}
	switch {
	case r.UpErr != nil:
		fmt.Fprintf(s.stderr, "cco: not starting %s: %s\n", s.name, safetext.Escape(r.UpErr.Error()))
		return ExitCannotRun
	case perr != nil:
		fmt.Fprintf(s.stderr, "cco: %s was stopped: %s\n", s.name, safetext.Escape(perr.Error()))
		return ExitCannotRun
	case r.Err != nil:
		fmt.Fprintf(s.stderr, "cco: waiting for bwrap: %s\n", safetext.Escape(r.Err.Error()))
		return ExitCannotRun
	case r.EndedBy != 0 && r.Status.Signaled() && r.Status.Signal() == syscall.SIGKILL:
		// Killed after the grace: the status is the signal's that ended
		// the session, as if the agent had obeyed it.
		fmt.Fprintf(s.stderr, "cco: %s did not end within %v of %s: the jail was killed\n", s.name, supervise.Grace, unix.SignalName(r.EndedBy))
		return 128 + int(r.EndedBy)
	}
	if !r.Ran && !r.Status.Signaled() && r.Status.ExitStatus() != 0 && s.spec.DropVanishedSockets() {
		return retryJail
	}
	code, why := s.exitStatus(r.Status, r.Ran)
	if why != "" {
		fmt.Fprintf(s.stderr, "cco: cannot build the jail: %s\n", safetext.Escape(why))
	}
	return code
}

func (s *launched) stopProxy() {
	s.sshRelay.Close()
	if s.px != nil {
		s.px.Stop()
	}
}

// invoker is the home and name of the user the agent runs for.
func invoker() (home, name string, err error) {
	home, name = os.Getenv("HOME"), os.Getenv("USER")
	if filepath.IsAbs(home) && name != "" {
		return home, name, nil
	}
	u, err := user.LookupId(strconv.Itoa(os.Getuid()))
	if err != nil {
		return "", "", fmt.Errorf("looking up uid %d: %w (fix: set HOME and USER)", os.Getuid(), err)
	}
	if !filepath.IsAbs(home) {
		home = u.HomeDir
	}
	if name == "" {
		name = u.Username
	}
	return home, name, nil
}

// sessionID names the session in the marker and the audit log: the
// kernel's random bytes (crypto/rand's packages are not worth their start-up
// time here); should that fail, the pid and the time still tell sessions
// apart.
func sessionID() string {
	var b [8]byte
	if n, err := unix.Getrandom(b[:], 0); err != nil || n != len(b) {
		return strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 16)
	}
	return hex.EncodeToString(b[:])
}
