package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/sandbox/appserver"
	"github.com/cco-dev/cco/sandbox/egress/bridge"
	"github.com/cco-dev/cco/sandbox/egress/policy"
	"github.com/cco-dev/cco/sandbox/egress/spawn"
	"github.com/cco-dev/cco/sandbox/engine"
	"github.com/cco-dev/cco/sandbox/jailinit"
	"github.com/cco-dev/cco/sandbox/loginfwd"
	"github.com/cco-dev/cco/sandbox/nodump"
	"github.com/cco-dev/cco/sandbox/pty"
)

// helper runs the in-sandbox modes:
//
//	sandbox-helper init [--status-fd N] -- <program> [args]
//	                                         the jail's pid 1 (sandbox/jailinit)
//	sandbox-helper guard <hook> [args...]    the guard's hooks
//	sandbox-helper exec [--status-fd N] [--endpoint-fd N] [--host-ports P,...] -- <program> [args]
//	                                         start the agent inside the jail
//
// --status-fd is the launcher's status stream, which cco's own engine hands
// the process it replaces itself with: that process is the jail's pid 1
// and writes the stream's exit-code line.
//
//	sandbox-helper connect <host> <port>     ssh's ProxyCommand: a tunnel
//	                                         through the agent's proxy endpoint
//
// init and exec refuse unless sandbox.ProbeJail passes: on the host they
// must never start a vendor binary unwrapped. Every mode first makes its
// process non-dumpable (sandbox/nodump): the agent can neither trace it
// nor read its memory, descriptors or environment.
func helper(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "cco sandbox-helper: usage: sandbox-helper init -- <program> [args...] | guard <hook> [args...] | exec -- <program> [args...]")
		return 2
	}
	if err := nodump.Seal(); err != nil {
		fmt.Fprintf(stderr, "cco sandbox-helper: %v\n", err)
		return exitCannotRun
	}
	switch args[0] {
	case "init":
		status, rest, err := jailinit.TakeStatus(args[1:])
		if err != nil {
			fmt.Fprintf(stderr, "cco sandbox-helper: %v\n", err)
			return 2
		}
		if len(rest) > 0 && rest[0] == "--" {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			fmt.Fprintln(stderr, "cco sandbox-helper: usage: sandbox-helper init -- <program> [args...]")
			return 2
		}
		if _, err := sandbox.ProbeJail(); err != nil {
			fmt.Fprintf(stderr, "cco sandbox-helper: refusing to run %s outside a cco jail: %v (start the agent as %s instead)\n", rest[0], err, agent.List(agent.Names(), "or"))
			return exitCannotRun
		}
		code := jailinit.Run(rest, os.Environ(), stderr)
		status.Exited(code)
		return code
	case "connect":
		return connect(args[1:], stdin, stdout, stderr)
	case "guard":
		if len(args) < 2 {
			fmt.Fprintln(stderr, "cco sandbox-helper: usage: sandbox-helper guard <hook> [args...]")
			return 2
		}
		return guard.Run(args[1], args[2:], stdin, stdout, stderr)
	case "selftest":
		return selftestMode(args[1:], stdout, stderr)
	case "exec":
		status, rest, err := jailinit.TakeStatus(args[1:])
		if err != nil {
			fmt.Fprintf(stderr, "cco sandbox-helper: %v\n", err)
			return 2
		}
		code := execMode(rest, status != nil, stderr)
		status.Exited(code)
		return code
	case engine.HelperMode:
		// cco's own jail engine's child, started by the launcher in the
		// jail's new namespaces (sandbox/engine): it builds the jail,
		// then stays its pid 1.
		return engine.Main(args[1:], stderr)
	case loginfwd.DialMode:
		// Started by the shadow, through nsenter, in the jail's network
		// namespace: it dials the login listener there and hands back the
		// connection (sandbox/loginfwd).
		return loginfwd.DialMain(args[1:])
	}
	fmt.Fprintf(stderr, "cco sandbox-helper: unknown mode %q (modes: init, guard, exec, connect, selftest)\n", args[0])
	return 2
}

// execMode starts the agent in the jail (sandbox-helper exec): its
// terminal, its proxy endpoint or bridge, then the agent. pid1 says that
// cco's engine exec'd this process as the jail's pid 1 (--status-fd).
func execMode(rest []string, pid1 bool, stderr io.Writer) int {
	endpointFD, ttyFD := -1, -1
	var hostPorts []int
	for len(rest) > 1 && (rest[0] == "--endpoint-fd" || rest[0] == "--tty-fd" || rest[0] == "--host-ports") {
		if rest[0] == "--host-ports" {
			for _, f := range strings.Split(rest[1], ",") {
				n, err := strconv.Atoi(f)
				if err != nil || n < 1 || n > 65535 {
					fmt.Fprintf(stderr, "cco sandbox-helper: --host-ports %q is not a list of ports (the shadow starts this mode)\n", rest[1])
					return 2
				}
				hostPorts = append(hostPorts, n)
			}
			rest = rest[2:]
			continue
		}
		n, err := strconv.Atoi(rest[1])
		if err != nil || n < 3 {
			fmt.Fprintf(stderr, "cco sandbox-helper: %s %q is not a descriptor (the shadow starts this mode)\n", rest[0], rest[1])
			return 2
		}
		if rest[0] == "--endpoint-fd" {
			endpointFD = n
		} else {
			ttyFD = n
		}
		rest = rest[2:]
	}
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		fmt.Fprintln(stderr, "cco sandbox-helper: usage: sandbox-helper exec -- <program> [args...]")
		return 2
	}
	m, err := sandbox.ProbeJail()
	if err != nil {
		fmt.Fprintf(stderr, "cco sandbox-helper: refusing to run %s outside a cco jail: %v (start the agent as %s instead)\n", rest[0], err, agent.List(agent.Names(), "or"))
		return exitCannotRun
	}
	if ttyFD >= 0 {
		// The agent's terminal: a pty of the jail's, whose master the
		// launcher outside relays (sandbox/pty).
		pty.UseControl(os.NewFile(uintptr(ttyFD), "pty-control"))
	}
	env, stay := os.Environ(), false
	if endpointFD >= 0 {
		// The launcher owns the endpoint: made here, in the jail's
		// network namespace, handed over, and the agent needs no
		// parent of the helper's.
		lns, err := spawn.Listen(hostPorts...)
		if err == nil {
			err = spawn.Send(endpointFD, lns)
		}
		if err != nil {
			fmt.Fprintf(stderr, "cco sandbox-helper: not starting %s: %v\n", rest[0], err)
			return exitCannotRun
		}
	} else if m.Egress == policy.ModePublic || m.Egress == policy.ModeAllowlist {
		// The bridge lives in this process, which therefore stays the
		// agent's parent for the whole session.
		b, err := bridge.Start(context.Background(), sandbox.EgressSocket)
		if err != nil {
			fmt.Fprintf(stderr, "cco sandbox-helper: not starting %s: %v\n", rest[0], err)
			return exitCannotRun
		}
		defer b.Close()
		env, stay = append(env, bridge.ProxyEnv(b.Addr)...), true
	}
	if pid1 {
		// cco's engine made this process the jail's pid 1: it reaps the
		// jail's orphans and stays the agent's parent (exec would make the
		// agent pid 1, which reaps nothing and ignores the signals it has
		// no handler for).
		jailinit.Adopt()
		stay = true
	}
	return runAgent(m.Agent, rest, env, stay, stderr)
}

// execAgent starts the agent in the jail with this process's environment.
func execAgent(agentName string, argv []string, stderr io.Writer) int {
	return runAgent(agentName, argv, os.Environ(), false, stderr)
}

// runAgent starts the agent in the jail with env. When the launcher holds
// the user's terminal (--tty-fd) the agent gets a fresh pty of the jail's
// own devpts, relayed outside (TIOCSTI into it reaches nothing outside);
// otherwise the helper replaces itself with the agent, unless stay says it
// must remain its parent (it hosts the egress bridge). A nested launch on
// the jail's own terminal runs the agent on that same terminal.
func runAgent(agentName string, argv, env []string, stay bool, stderr io.Writer) int {
	if p, ok := agent.Lookup(agentName); ok && p.AppServer && appserver.Applies(argv[1:]) {
		// `codex agents` needs an app-server of its own in this pid
		// namespace; the client's status is the result.
		return appserver.Run(argv[0], argv[1:], env, os.Stdin, os.Stdout, os.Stderr)
	}
	// The shadow starts bwrap with SIGINT and SIGQUIT ignored, so that a
	// terminal's ^C does not kill bwrap; catching them here means exec
	// resets them to the default for the agent.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGQUIT)
	if stay || pty.Controlled() {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		code, err := pty.Run(cmd)
		if err != nil {
			fmt.Fprintf(stderr, "cco sandbox-helper: starting %s: %v\n", argv[0], err)
		}
		return code
	}
	err := syscall.Exec(argv[0], argv, env)
	fmt.Fprintf(stderr, "cco sandbox-helper: starting %s: %v\n", argv[0], err)
	if os.IsNotExist(err) {
		return exitNotFound
	}
	return exitCannotRun
}

// connect is ssh's ProxyCommand in a jail with ssh_agent on
// (sandbox/sshagent): a CONNECT host:port through the agent's proxy
// endpoint, then the bytes both ways. The egress proxy decides (port 22
// to ssh_hosts only) and records the connection.
func connect(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "cco sandbox-helper: usage: sandbox-helper connect <host> <port> (ssh's ProxyCommand in the jail)")
		return 2
	}
	if _, err := sandbox.ProbeJail(); err != nil {
		fmt.Fprintf(stderr, "cco sandbox-helper: connect runs only inside a cco jail: %v\n", err)
		return exitCannotRun
	}
	c, err := net.Dial("tcp", spawn.Endpoint.String())
	if err != nil {
		fmt.Fprintf(stderr, "cco sandbox-helper: the egress proxy's endpoint %s: %v\n", spawn.Endpoint, err)
		return exitCannotRun
	}
	defer c.Close()
	if err := bridge.OpenTunnel(c, net.JoinHostPort(args[0], args[1])); err != nil {
		fmt.Fprintf(stderr, "cco sandbox-helper: %v\n", err)
		return exitCannotRun
	}
	go func() {
		io.Copy(c, stdin)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}()
	io.Copy(stdout, c)
	return 0
}
