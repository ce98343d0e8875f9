package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/sandbox/appserver"
	"github.com/cco-dev/cco/sandbox/egress"
	"github.com/cco-dev/cco/sandbox/pty"
)

// launch starts the agent p in its jail and returns its exit status.
func launch(p *agent.Profile, args []string, stderr io.Writer) int {
	vendor := sandbox.SystemRoot + p.Binary
	if _, err := sandbox.ProbeJail(); err == nil {
		return nested(p, vendor, args, stderr)
	}
	cfg, err := sandbox.LoadConfig(sandbox.SystemRoot + sandbox.ConfigPath)
	if err != nil {
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return exitCannotRun
	}
	if fi, err := os.Stat(vendor); err != nil || fi.IsDir() {
		fmt.Fprintf(stderr, "cco: the %s binary %s is missing (fix: sudo cco-install --upgrade %s)\n", p.Name, vendor, p.Upgrade)
		return exitNotFound
	}
	bwrap := sandbox.SystemRoot + sandbox.BwrapPath
	if _, err := os.Stat(bwrap); err != nil {
		fmt.Fprintf(stderr, "cco: cannot build the jail: bubblewrap is not installed at %s (fix: sudo apt-get install bubblewrap, or sudo dnf install bubblewrap)\n", bwrap)
		return exitCannotRun
	}
	home, name, err := invoker()
	if err != nil {
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return exitCannotRun
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "cco: cannot build the jail: the current directory: %v\n", err)
		return exitCannotRun
	}
	// Live before planning, and under the home's registry lock until the
	// placeholders exist: a session ending meanwhile keeps the placeholders
	// this one will bind.
	unlock, err := sandbox.LockRegistry(home)
	if err != nil {
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return exitCannotRun
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
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return exitCannotRun
	}
	pol, err := sandbox.EgressPolicy(cfg, p.Name, home)
	if err != nil {
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return exitCannotRun
	}
	rt, err := os.MkdirTemp("", "cco-jail-")
	if err != nil {
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return exitCannotRun
	}
	session := sessionID()
	host, err := startEgress(pol, session, rt, stderr)
	if err != nil {
		os.RemoveAll(rt)
		fmt.Fprintf(stderr, "cco: not starting %s: %v\n", p.Name, err)
		return exitCannotRun
	}
	// The shadow hosts the proxy for the whole session, and closes it on
	// every path out.
	egressDir := ""
	if host != nil {
		egressDir = host.Dir
	}
	direct := !needsHelper(p, args, cfg) && host == nil
	spec, prep, err := sandbox.Plan(&sandbox.Launch{
		Profile: p, Config: cfg, Home: home, User: name, UID: os.Getuid(), Cwd: cwd,
		Environ: os.Environ(), RuntimeDir: rt, Session: session, Args: args, Direct: direct,
		Egress: pol.Mode, EgressDir: egressDir,
	})
	if err != nil {
		closeEgress(host)
		os.RemoveAll(rt)
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return exitCannotRun
	}
	sess, err := sandbox.Prepare(home, rt, prep)
	if err != nil {
		closeEgress(host)
		os.RemoveAll(rt)
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return exitCannotRun
	}
	release() // registered and prepared: ending sessions now leave our mount points alone
	code := supervise(bwrap, spec, !direct, stderr)
	closeEgress(host)
	for _, a := range sess.Added() {
		fmt.Fprintf(stderr, "\ncco: WARNING: this session added a command that runs outside the jail at the next start:\n  %s\n  Remove it unless you added it yourself.\n", a)
	}
	sess.Finish()
	return code
}

// nested runs the vendor binary in the jail this process is already in
// (decided by sandbox.ProbeJail, never by a variable): a second bwrap would
// only nest namespaces, and the jail's flags are the same.
func nested(p *agent.Profile, vendor string, args []string, stderr io.Writer) int {
	cfg, err := sandbox.LoadConfig(sandbox.SystemRoot + sandbox.ConfigPath)
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
	return p.Name == "codex" && appserver.Applies(p.Args(args, agent.Options{SkipPermissions: cfg.ClaudeSkipPermissions}))
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

// startEgress starts the session's policy proxy on a unix socket in a fresh
// private directory under rt, or, for egress = "off", announces that the
// jail has no network and returns nil. Any failure is fatal to the launch:
// an agent never starts without the proxy its policy asks for.
func startEgress(pol egress.Policy, session, rt string, stderr io.Writer) (*egress.Host, error) {
	if pol.Mode == egress.ModeOff {
		fmt.Fprint(stderr, egress.OffBanner())
		return nil, nil
	}
	// No log writer: the agent owns the terminal, and every refusal is in
	// the audit log with its reason.
	px, err := egress.NewProxy(pol, session, nil)
	if err != nil {
		return nil, fmt.Errorf("the egress proxy cannot start: %w", err)
	}
	h, err := egress.StartHost(context.Background(), px, rt)
	if err != nil {
		px.Close()
		return nil, fmt.Errorf("the egress proxy cannot start: %w", err)
	}
	return h, nil
}

func closeEgress(h *egress.Host) {
	if h != nil {
		h.Close()
	}
}

func sessionID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// supervise runs bwrap as a child, so that the shadow stays the jail's
// parent: it forwards signals to the agent and returns its exit status.
func supervise(bwrap string, spec *sandbox.Spec, helper bool, stderr io.Writer) int {
	prog, err := sandbox.SeccompBytes()
	if err != nil {
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return exitCannotRun
	}
	secR, secW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return exitCannotRun
	}
	// The program is a few hundred bytes: it fits the pipe's buffer.
	secW.Write(prog)
	secW.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		secR.Close()
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return exitCannotRun
	}
	spec.SeccompFD, spec.StatusFD = 3, 4
	cmd := &exec.Cmd{
		Path: bwrap, Args: append([]string{bwrap}, sandbox.Argv(spec)...),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		ExtraFiles: []*os.File{secR, stW},
	}
	// Ignored signals stay ignored across exec: a ^C from the terminal
	// must reach the agent, not kill bwrap (whose death would SIGKILL the
	// agent). The helper restores them for the agent.
	if helper {
		signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP)
	err = cmd.Start()
	secR.Close()
	stW.Close()
	if err != nil {
		stR.Close()
		fmt.Fprintf(stderr, "cco: cannot build the jail: starting %s: %v\n", bwrap, err)
		return exitCannotRun
	}
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT)
	// Signals are forwarded from one goroutine; the main one learns the
	// jail's pid and waits, so the launch path has no other handoff.
	child := make(chan int, 1)
	stop := make(chan struct{})
	go func() {
		pid, known := 0, false
		for {
			select {
			case s := <-sigs:
				if !known {
					// Wait for the jail: its pid comes once built, or
					// 0 when bwrap gives up.
					pid, known = <-child, true
					child <- pid
				}
				forward(pid, s.(syscall.Signal))
			case <-stop:
				return
			}
		}
	}()
	pid := readChildPID(stR)
	child <- pid
	err = cmd.Wait()
	stR.Close()
	signal.Stop(sigs)
	close(stop)
	return exitStatus(err, pid, bwrap, stderr)
}

// readChildPID reads bwrap's --json-status-fd stream up to the child-pid
// line, which bwrap writes once the jail is built; 0 means the stream ended
// first (bwrap failed). The rest of the stream (the exit code) fits the
// pipe's buffer and is never needed.
func readChildPID(r io.Reader) int {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l := sc.Bytes()
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
func exitStatus(err error, childPID int, bwrap string, stderr io.Writer) int {
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		code = ee.ExitCode()
	} else if err != nil {
		fmt.Fprintf(stderr, "cco: waiting for bwrap: %v\n", err)
		return exitCannotRun
	}
	if childPID == 0 && code != 0 {
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
	if perr != nil && (strings.Contains(msg, "uid map") || strings.Contains(msg, "No permissions to create") ||
		strings.Contains(msg, "new namespace") || strings.Contains(msg, "Permission denied")) {
		return "user namespaces are blocked here (" + msg + "); on Ubuntu 24.04 AppArmor restricts them: " +
			"fix: sudo cco-install (it installs an AppArmor profile for " + bwrap + " that allows userns), or by hand: " +
			"write /etc/apparmor.d/bwrap with `abi <abi/4.0>, include <tunables/global> profile bwrap " + bwrap +
			" flags=(unconfined) { userns, }` and run sudo apparmor_parser -r /etc/apparmor.d/bwrap"
	}
	return "bwrap failed before the agent started (its message is above); fix that, or report it with the message"
}
