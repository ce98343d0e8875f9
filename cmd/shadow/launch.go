package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/sandbox/appserver"
	"github.com/cco-dev/cco/sandbox/egress/policy"
	"github.com/cco-dev/cco/sandbox/loginfwd"
	"github.com/cco-dev/cco/sandbox/pty"
	"github.com/cco-dev/cco/sandbox/rootview"
	"golang.org/x/sys/unix"
)

// launch starts the agent p in its jail and returns its exit status.
//
// Every launch waits for this function, so its order is chosen for speed:
// the egress proxy's socket and audit log are made as soon as the policy is
// known (the proxy process itself starts with the first connection), the
// jail's own files are handed to bwrap as data (nothing is written for them
// on the host), and nothing on the way to bwrap's start, or back from its
// end, waits for another goroutine: on a small machine each such handoff
// can cost a millisecond.
func launch(p *agent.Profile, args []string, stderr io.Writer) int {
	vendor := sandbox.SystemRoot + p.Binary
	if _, err := sandbox.ProbeJail(); err == nil {
		return nested(p, vendor, args, stderr)
	}
	cannot := func(err error) int { return cannotBuild(stderr, err) }
	cfg, err := sandbox.LoadConfig(sandbox.SystemRoot + sandbox.ConfigPath)
	if err != nil {
		return cannot(err)
	}
	if fi, err := os.Stat(vendor); err != nil || fi.IsDir() {
		fmt.Fprintf(stderr, "cco: the %s binary %s is missing (fix: sudo cco-install --upgrade %s)\n", p.Name, vendor, p.Upgrade)
		return exitNotFound
	}
	bwrap := sandbox.SystemRoot + sandbox.BwrapPath
	if _, err := os.Stat(bwrap); err != nil {
		return cannot(fmt.Errorf("bubblewrap is not installed at %s (fix: sudo apt-get install bubblewrap, or sudo dnf install bubblewrap)", bwrap))
	}
	home, name, err := invoker()
	if err != nil {
		return cannot(err)
	}
	pol, err := sandbox.EgressPolicy(cfg, p.Name, home)
	if err != nil {
		return cannot(err)
	}
	session := sessionID()
	var px *proxy
	if pol.Mode == policy.ModeOff {
		fmt.Fprint(stderr, policy.OffBanner())
	} else if px, err = startProxy(pol, session); err != nil {
		fmt.Fprintf(stderr, "cco: not starting %s: %v\n", p.Name, err)
		return exitCannotRun
	}
	fail := func(err error) int {
		if px != nil {
			px.stop()
		}
		return cannot(err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fail(fmt.Errorf("the current directory: %w", err))
	}
	// Live before planning, and under the home's registry lock until the
	// placeholders exist: a session ending meanwhile keeps the placeholders
	// this one will bind.
	unlock, err := sandbox.LockRegistry(home)
	if err != nil {
		return fail(err)
	}
	locked := true
	release := func() {
		if locked {
			unlock()
			locked = false
		}
	}
	defer release()
	if err := sandbox.Register(home); err != nil {
		return fail(err)
	}
	egressSocket, runtimeDir := "", ""
	if px != nil {
		egressSocket, runtimeDir = px.Socket, px.Runtime
	}
	direct := !needsHelper(p, args, cfg) && px == nil
	spec, prep, err := sandbox.Plan(&sandbox.Launch{
		Profile: p, Config: cfg, Home: home, User: name, UID: os.Getuid(), Cwd: cwd,
		Environ: os.Environ(), Session: session, Args: args, Direct: direct,
		Egress: pol.Mode, EgressSocket: egressSocket,
	})
	if err != nil {
		return fail(err)
	}
	sess, err := sandbox.Prepare(home, runtimeDir, prep)
	if err != nil {
		return fail(err)
	}
	release() // registered and prepared: ending sessions now leave our mount points alone
	sess.WatchRepos(spec.Workspace, prep.Repos)
	code := supervise(bwrap, spec, !direct, px, p.Name, stderr)
	if code == retryJail {
		code = supervise(bwrap, spec, !direct, px, p.Name, stderr)
		if code == retryJail {
			code = cannotBuild(stderr, errors.New("host sockets the jail masks keep going away while it is built (fix: launch again)"))
		}
	}
	if px != nil {
		px.stop()
	}
	for _, t := range sess.Tampered() {
		fmt.Fprintf(stderr, "cco: WARNING: %s was replaced, moved or removed during the session: it is not the file the jail protected (check it before running git or %s there)\n", t, p.Name)
	}
	for _, a := range sess.Added() {
		fmt.Fprintf(stderr, "\ncco: WARNING: this session added a command that runs outside the jail:\n  %s\n  Remove it unless you added it yourself.\n", a)
	}
	sess.Finish()
	return code
}

// nested runs the vendor binary in the jail this process is already in
// (decided by sandbox.ProbeJail, never by a variable): a second bwrap would
// only nest namespaces, and the jail's flags are the same.
func nested(p *agent.Profile, vendor string, args []string, stderr io.Writer) int {
	cfg, err := sandbox.LoadNestedConfig(sandbox.SystemRoot + sandbox.ConfigPath)
	if err != nil {
		fmt.Fprintf(stderr, "cco: %v\n", err)
		return exitCannotRun
	}
	if fi, err := os.Stat(vendor); err != nil || fi.IsDir() {
		fmt.Fprintf(stderr, "cco: the %s binary %s is missing (fix: sudo cco-install --upgrade %s)\n", p.Name, vendor, p.Upgrade)
		return exitNotFound
	}
	argv := append([]string{vendor}, p.Args(args, agent.Options{SkipPermissions: cfg.ClaudeSkipPermissions})...)
	return execAgent(p.Name, argv, stderr)
}

// needsHelper tells whether the agent must start through the in-jail
// helper: on a terminal (the fresh pty, and ^C reaching the agent rather
// than killing bwrap) and for `codex agents` (the app-server). Otherwise
// bwrap runs the vendor binary itself, one process start fewer.
func needsHelper(p *agent.Profile, args []string, cfg *sandbox.Config) bool {
	for _, f := range []*os.File{os.Stdin, os.Stdout, os.Stderr} {
		if pty.IsTerminal(f) {
			return true
		}
	}
	return p.AppServer && appserver.Applies(p.Args(args, agent.Options{SkipPermissions: cfg.ClaudeSkipPermissions}))
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

// supervise runs bwrap as a child, so that the shadow stays the jail's
// parent: it forwards signals to the agent and returns its exit status.
//
// A proxy that cannot serve ends the session (its socket refuses
// connections meanwhile): bwrap is killed and the launch says why, 126.
func supervise(bwrap string, spec *sandbox.Spec, helper bool, px *proxy, name string, stderr io.Writer) int {
	cannot := func(err error) int { return cannotBuild(stderr, err) }
	prog, err := sandbox.SeccompBytes()
	if err != nil {
		return cannot(err)
	}
	// Descriptors from 3: the seccomp program, the status pipe, then the
	// jail's files made from data.
	spec.SeccompFD, spec.StatusFD, spec.DataFD = 3, 4, 5
	stR, stW, err := os.Pipe()
	if err != nil {
		return cannot(err)
	}
	defer stR.Close()
	fds := []uintptr{os.Stdin.Fd(), os.Stdout.Fd(), os.Stderr.Fd()}
	var open []*os.File
	closeOpen := func() {
		for _, f := range open {
			f.Close()
		}
	}
	for i, d := range append([][]byte{prog}, sandbox.DataFiles(spec)...) {
		r, err := dataPipe(d)
		if err != nil {
			closeOpen()
			stW.Close()
			return cannot(err)
		}
		open = append(open, r)
		fds = append(fds, r.Fd())
		if i == 0 {
			open = append(open, stW)
			fds = append(fds, stW.Fd()) // descriptor 4
		}
	}
	// Then the bind sources, opened without following a link, and the
	// masks of host sockets that went away since the plan dropped.
	spec.DropVanishedSockets()
	srcs, err := sandbox.OpenBindSources(spec)
	if err != nil {
		closeOpen()
		return cannot(err)
	}
	spec.BindFD = len(fds)
	for _, f := range srcs {
		open = append(open, f)
		fds = append(fds, f.Fd())
	}
	// Ignored signals stay ignored across exec: a ^C from the terminal
	// must reach the agent, not kill bwrap (whose death would SIGKILL the
	// agent). The helper restores them for the agent.
	if helper {
		signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
	}
	// syscall.ForkExec, not os/exec: os/exec makes a throw-away child once
	// per process to learn whether pidfds work, a process start that every
	// launch would pay for; the shadow needs only the pid.
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: fds}
	var bwrapPID int
	err = sandbox.WithProcLimit(spec.MaxProcs, func() (err error) {
		start := func(argv []string) (int, error) { return syscall.ForkExec(bwrap, argv, attr) }
		if rootview.Applies(os.Geteuid()) {
			// Root's jail reads no root-only file (docs/adr/0018-root-view.md).
			trees, err := rootview.Prepare(spec)
			if err != nil {
				return err
			}
			start = func(argv []string) (int, error) { return rootview.Start(bwrap, argv, attr, trees) }
		}
		bwrapPID, err = start(append([]string{bwrap}, sandbox.Argv(spec)...))
		return err
	})
	closeOpen()
	if err != nil {
		return cannot(fmt.Errorf("starting %s: %w", bwrap, err))
	}
	// bwrap's pidfd: the signals the shadow sends it can never reach a
	// process that reused its pid after it was reaped.
	proc := openProcess(bwrapPID)
	defer proc.close()
	// What starts threads of its own (the runtime's signal loop, the
	// proxy's watcher) starts now, while bwrap builds the jail: on a small
	// machine every thread start before the fork is a delay of the launch.
	// A signal in the moments before is the default's: the shadow dies,
	// bwrap and the jail with it (--die-with-parent), and the next launch
	// removes what it left.
	//
	// From here on the launcher mostly waits: one processor keeps its
	// goroutines on one thread, where a thread start, or a wake-up across
	// processors, costs about a millisecond on a small virtual machine.
	// (Set after the fork, its stop-the-world is off the launch's path.)
	runtime.GOMAXPROCS(1)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT)
	if px != nil {
		px.watch()
	}
	// One goroutine forwards signals and acts on a proxy that cannot
	// serve (the session then ends); the main one learns the jail's pid
	// and waits, and never waits for it: the launch's own path has no
	// handoff.
	//
	// SIGTERM and SIGHUP end the session: the agent gets the signal, and
	// bwrap (with the jail) is killed should it still run sessionGrace
	// later, so that an agent that ignores them cannot hold the session.
	var failed <-chan error
	if px != nil {
		failed = px.failed
	}
	child := make(chan int, 1)
	stop := make(chan struct{})
	var endedBy atomic.Int32
	go func() {
		pid, known := 0, false
		var pending []syscall.Signal
		var grace <-chan time.Time
		for {
			// The jail's pid is waited for only with a signal to pass
			// on: a signal while bwrap builds the jail is forwarded
			// once it is built, and the grace runs meanwhile.
			var pidC chan int
			if !known && len(pending) > 0 {
				pidC = child
			}
			select {
			case pid = <-pidC:
				known = true
				for _, s := range pending {
					forward(pid, s)
				}
				pending = nil
			case s := <-sigs:
				sig := s.(syscall.Signal)
				if !known {
					select {
					case pid = <-child:
						known = true
					default:
					}
				}
				if known {
					forward(pid, sig)
				} else {
					pending = append(pending, sig)
				}
				if (sig == syscall.SIGTERM || sig == syscall.SIGHUP) && grace == nil {
					endedBy.Store(int32(sig))
					grace = time.After(sessionGrace)
				}
			case <-grace:
				proc.signal(syscall.SIGKILL)
				grace = nil
			case <-failed:
				proc.signal(syscall.SIGKILL)
				failed = nil
			case <-stop:
				return
			}
		}
	}()
	st := newJailStatus(stR)
	pid := st.childPID()
	child <- pid
	// The agent's login callback, from the host's loopback while the jail
	// listens on a login port (docs/adr/0054-login-callback-forwarding.md).
	defer loginfwd.Start(context.Background(), pid, loginPorts(name), loginfwd.Options{
		Helper: sandbox.SystemRoot + sandbox.HelperPath, Warn: stderr, Agent: name})()
	ws, err := proc.wait()
	// Signals stay caught until the process exits: one arriving during the
	// clean-up must not cut it short.
	close(stop)
	var perr error
	if px != nil {
		perr = px.verdict()
	}
	if perr != nil {
		fmt.Fprintf(stderr, "cco: %s was stopped: %v\n", name, perr)
		return exitCannotRun
	}
	if err != nil {
		fmt.Fprintf(stderr, "cco: waiting for bwrap: %v\n", err)
		return exitCannotRun
	}
	if sig := syscall.Signal(endedBy.Load()); sig != 0 && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		// Killed after the grace: the status is the signal's that ended
		// the session, as if the agent had obeyed it.
		fmt.Fprintf(stderr, "cco: %s did not end within %v of %s: the jail was killed\n", name, sessionGrace, unix.SignalName(sig))
		return 128 + int(sig)
	}
	ran := pid != 0 && st.ran()
	if !ran && !ws.Signaled() && ws.ExitStatus() != 0 && spec.DropVanishedSockets() {
		return retryJail
	}
	return exitStatus(ws, ran, bwrap, stderr)
}

// loginPorts are the login ports of the agent name's profile.
func loginPorts(name string) []int {
	if p, ok := agent.Lookup(name); ok {
		return p.LoginPorts
	}
	return nil
}

// retryJail is supervise's answer when the jail failed to build because a
// host socket it masks went away meanwhile (bwrap could not make its mount
// point): the launch builds it once more, without that mask.
const retryJail = -1

// sessionGrace is how long after SIGTERM or SIGHUP the agent has to end
// before bwrap, and the jail with it, is killed: the session ends within
// it, well inside the 5 seconds a service manager or a closed terminal
// waits.
const sessionGrace = 3 * time.Second

// process is a child the shadow waits for and signals through a pidfd
// where the kernel has them: waiting then goes through the runtime's poller,
// so the launcher's thread is not held in a blocking system call for the
// whole session (the runtime would start another to stand in for it), and a
// signal cannot reach a process that reused the pid.
type process struct {
	pid int
	fd  *os.File // the pidfd, or nil
}

func openProcess(pid int) *process {
	p := &process{pid: pid}
	if fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK); err == nil {
		p.fd = os.NewFile(uintptr(fd), "pidfd")
	}
	return p
}

func (p *process) close() {
	if p.fd != nil {
		p.fd.Close()
	}
}

// signal sends s to the process, if it is still there to get it (once the
// pidfd is closed, the process was reaped: nothing is sent).
func (p *process) signal(s syscall.Signal) {
	if p.fd == nil {
		syscall.Kill(p.pid, s)
		return
	}
	if rc, err := p.fd.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.PidfdSendSignal(int(fd), s, nil, 0) })
	}
}

// wait reaps the process.
func (p *process) wait() (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	if p.fd != nil {
		reaped, werr := false, error(nil)
		if rc, err := p.fd.SyscallConn(); err == nil {
			err = rc.Read(func(uintptr) bool {
				for {
					n, err := syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
					if err == syscall.EINTR {
						continue
					}
					if n == 0 && err == nil {
						return false // still running: the poller says when it ends
					}
					reaped, werr = true, err
					return true
				}
			})
			if err == nil && reaped {
				return ws, werr
			}
		}
	}
	return wait(p.pid)
}

// wait reaps pid, blocking.
func wait(pid int) (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			return ws, err
		}
	}
}

// jailStatus reads bwrap's --json-status-fd stream: a child-pid line once
// bwrap has started the jail's first process, and an exit-code line only if
// the command ran (a jail that fails to build ends the stream without one).
type jailStatus struct {
	f  *os.File
	sc *bufio.Scanner
}

func newJailStatus(f *os.File) *jailStatus { return &jailStatus{f: f, sc: bufio.NewScanner(f)} }

// childPID reads up to the child-pid line; 0 means the stream ended first
// (bwrap failed).
func (j *jailStatus) childPID() int {
	for j.sc.Scan() {
		l := j.sc.Bytes()
		if i := bytes.Index(l, []byte(`"child-pid":`)); i >= 0 {
			rest := bytes.TrimLeft(l[i+len(`"child-pid":`):], " ")
			n := 0
			for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
				n++
			}
			if pid, err := strconv.Atoi(string(rest[:n])); err == nil && pid > 0 {
				return pid
			}
		}
	}
	return 0
}

// ran reports, once bwrap has exited, whether the command ran: bwrap wrote
// its exit-code line before it exited, so the line is read at once; the
// deadline only bounds a stream that a jail's stray process holds open.
func (j *jailStatus) ran() bool {
	j.f.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	for j.sc.Scan() {
		if bytes.Contains(j.sc.Bytes(), []byte(`"exit-code":`)) {
			return true
		}
	}
	return false
}

// forward sends s to the agent: the child of bwrap's pid-1 reaper (whose
// host pid bwrap reported). A ^C typed at the terminal already reached the
// agent, so SIGINT and SIGQUIT are forwarded only when this process is not
// in the terminal's foreground.
func forward(reaper int, s syscall.Signal) {
	if reaper <= 0 {
		return
	}
	if (s == syscall.SIGINT || s == syscall.SIGQUIT) && inForeground() {
		return
	}
	target := reaper
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(reaper) + "/task/" + strconv.Itoa(reaper) + "/children"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				target = n
			}
		}
	}
	syscall.Kill(target, s)
}

func inForeground() bool {
	f, err := os.Open("/dev/tty")
	if err != nil {
		return false
	}
	defer f.Close()
	pg, err := tcgetpgrp(int(f.Fd()))
	return err == nil && pg == syscall.Getpgrp()
}

// exitStatus is the agent's status as bwrap reports it; a jail that failed
// before the agent started is diagnosed and refused with 126.
func exitStatus(ws syscall.WaitStatus, ran bool, bwrap string, stderr io.Writer) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	code := ws.ExitStatus()
	if !ran && code != 0 {
		fmt.Fprintf(stderr, "cco: cannot build the jail: %s\n", diagnose(bwrap))
		return exitCannotRun
	}
	return code
}

// diagnose tells why bwrap could not build a jail. It runs only after a
// failure, so the fast path never pays for it.
func diagnose(bwrap string) string {
	var out bytes.Buffer
	c := exec.Command(bwrap, "--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "--", "/bin/true")
	c.Stderr = &out
	perr := c.Run()
	msg := strings.TrimSpace(out.String())
	container := perr != nil && inContainer(os.Getenv)
	if perr != nil && (strings.Contains(msg, "uid map") || strings.Contains(msg, "No permissions to create") ||
		strings.Contains(msg, "new namespace") || strings.Contains(msg, "Permission denied")) {
		if container {
			return "user namespaces are blocked here. " + containerFix(msg)
		}
		return "user namespaces are blocked here (" + msg + "); on Ubuntu 24.04 AppArmor restricts them: " +
			"fix: sudo cco-install (it installs an AppArmor profile for " + bwrap + " that allows userns), or by hand: " +
			"write /etc/apparmor.d/bwrap with `abi <abi/4.0>, include <tunables/global> profile bwrap " + bwrap +
			" flags=(unconfined) { userns, }` and run sudo apparmor_parser -r /etc/apparmor.d/bwrap"
	}
	if container {
		return containerFix(msg)
	}
	return "bwrap failed before the agent started (its message is above); fix that, or report it with the message"
}

// inContainer reports whether this runs in a container: Docker's and
// Podman's marker files, or the container variable systemd-nspawn and
// Podman set.
func inContainer(getenv func(string) string) bool {
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Lstat(f); err == nil {
			return true
		}
	}
	return getenv("container") != ""
}

// containerFix is the refusal inside a container whose engine's defaults
// refuse what bwrap needs (see examples/Dockerfile).
func containerFix(msg string) string {
	return "bwrap cannot build the jail inside this container (" + msg + "): the container engine's defaults refuse " +
		"what it needs: Docker's default seccomp profile blocks unshare(CLONE_NEWUSER), mount and pivot_root, its " +
		"docker-default AppArmor profile blocks mount, and its masked /proc makes the kernel refuse the jail's own /proc. " +
		"fix: start the container with --security-opt seccomp=unconfined --security-opt apparmor=unconfined " +
		"--security-opt systempaths=unconfined (devcontainer.json: \"runArgs\": [\"--security-opt\", \"seccomp=unconfined\", " +
		"\"--security-opt\", \"apparmor=unconfined\", \"--security-opt\", \"systempaths=unconfined\"]), never --privileged; " +
		"on an Ubuntu 24.04 host, AppArmor restricts user namespaces on the host itself: there, sudo cco-install " +
		"(it installs an AppArmor profile for bwrap that allows userns), or sudo apparmor_parser -r /etc/apparmor.d/bwrap. " +
		"See examples/Dockerfile."
}

// cannotBuild says why the jail cannot be built, and is the launch's status.
func cannotBuild(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
	return exitCannotRun
}

// dataPipe is the read end of a pipe that holds data: bwrap reads it once it
// runs. Up to PIPE_BUF bytes always fit in a pipe, so the write is done
// here; more is written by a goroutine, which ends once bwrap has read it
// or has gone (EPIPE). Plain system calls: these descriptors are only handed
// on, never polled.
func dataPipe(data []byte) (*os.File, error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("a pipe for the jail: %w", err)
	}
	r, w := os.NewFile(uintptr(p[0]), "jail-data"), p[1]
	write := func() error {
		defer syscall.Close(w)
		for b := data; len(b) > 0; {
			n, err := syscall.Write(w, b)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			b = b[n:]
		}
		return nil
	}
	if len(data) > 4096 {
		go write()
		return r, nil
	}
	if err := write(); err != nil {
		r.Close()
		return nil, fmt.Errorf("a pipe for the jail: %w", err)
	}
	return r, nil
}
