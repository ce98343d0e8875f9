// Package appserver runs `codex agents` inside the jail against an
// app-server of its own.
//
// Codex's `agents` subcommand talks to a managed app-server that Codex starts
// and finds by process, which breaks in the jail's pid namespace. Instead, Run
// starts `codex app-server --listen unix://DIR/server.sock` itself, with DIR a
// fresh mode-0700 directory in the jail's private /tmp (never in CODEX_HOME,
// which is the user's real, bound-in login state), waits for the socket, and
// runs the client with `--remote unix://DIR/server.sock`. A unix socket has no
// authentication of its own: its boundary is the directory's mode and the
// jail's private /tmp.
package appserver

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cco-dev/cco/sandbox/jailinit"

	"github.com/cco-dev/cco/sandbox/pty"
)

// Exit statuses of Run's own failures; the client's status is returned as
// it is.
const (
	// ExitServerFailed: the app-server could not be started or never
	// listened.
	ExitServerFailed = 1
	// ExitNotFound: the codex binary does not exist.
	ExitNotFound = 127
	// ExitCannotRun: the codex binary exists but cannot be run.
	ExitCannotRun = 126
)

// sockPathMax is the longest path a unix socket address holds (sun_path
// with its terminating NUL).
const sockPathMax = 107

// Test seams.
var (
	listenTimeout = 10 * time.Second
	killGrace     = 2 * time.Second
)

// Run runs the codex command line args (already known to satisfy Applies)
// through a private app-server and returns the client's exit status (128+n
// when it died of signal n). codex is the path of the codex binary, env the
// environment of both processes.
//
// The server gets the user's -c/--config, --enable and --disable options (so
// that it runs with the configuration the user asked for), the last
// -C/--cd as its working directory, and none of the client's other options
// (--no-alt-screen, for one, means nothing to it). When the client exits, or
// Run receives SIGTERM, SIGINT or SIGHUP, the server's process group gets
// SIGTERM, then SIGKILL after 2 s, and the directory is removed.
//
// When stdin, stdout and stderr are this process's own, the client runs
// through pty.Run, and so on a fresh pty like every agent in the jail.
func Run(codex string, args []string, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	p := planFor(args)
	if p.dir != "" {
		abs, err := filepath.Abs(p.dir)
		if err == nil {
			p.dir = abs
		}
		if st, err := os.Stat(p.dir); err != nil || !st.IsDir() {
			fmt.Fprintf(stderr, "codex: -C/--cd %s is not a directory: give an existing directory\n", p.dir)
			return ExitServerFailed
		}
	}
	dir, err := makeSocketDir(env)
	if err != nil {
		fmt.Fprintf(stderr, "codex: %v\n", err)
		return ExitServerFailed
	}
	defer os.RemoveAll(dir)
	url := "unix://" + filepath.Join(dir, "server.sock")

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	srv, err := startServer(codex, p, url, env)
	if err != nil {
		fmt.Fprintf(stderr, "codex: starting the app-server: %v\n", err)
		return startStatus(err)
	}
	defer srv.stop()
	if sig, err := srv.waitListening(filepath.Join(dir, "server.sock"), sigs); sig != nil {
		return 128 + int(sig.(syscall.Signal))
	} else if err != nil {
		fmt.Fprintf(stderr, "codex: %v\n", err)
		if log := srv.log.String(); log != "" {
			fmt.Fprintf(stderr, "codex: the app-server's output:\n%s", log)
			if !strings.HasSuffix(log, "\n") {
				fmt.Fprintln(stderr)
			}
		} else {
			fmt.Fprintln(stderr, "codex: the app-server wrote nothing")
		}
		return ExitServerFailed
	}

	client := exec.Command(codex, append([]string{"--remote", url}, args...)...)
	client.Env = env
	return runClient(client, stdin, stdout, stderr, sigs, srv)
}

// runClient runs the client and stops the server when it exits or when a
// signal arrives for it.
func runClient(client *exec.Cmd, stdin io.Reader, stdout, stderr io.Writer, sigs chan os.Signal, srv *server) int {
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	own := stdin == io.Reader(os.Stdin) && stdout == io.Writer(os.Stdout) && stderr == io.Writer(os.Stderr)
	if own {
		// pty.Run forwards the signals to the client itself.
		go func() {
			code, err := pty.Run(client)
			done <- result{code, err}
		}()
	} else {
		client.Stdin, client.Stdout, client.Stderr = stdin, stdout, stderr
		// A stdin that never ends must not keep Run waiting after the
		// client exited.
		client.WaitDelay = time.Second
		if release, err := jailinit.Start(client); err != nil {
			done <- result{startStatus(err), err}
		} else {
			go func() {
				_ = client.Wait()
				release()
				done <- result{exitStatus(client.ProcessState), nil}
			}()
		}
	}
	for {
		select {
		case s := <-sigs:
			if !own && client.Process != nil {
				_ = client.Process.Signal(s)
			}
			go srv.stop()
		case r := <-done:
			if r.err != nil {
				fmt.Fprintf(stderr, "codex: starting the client: %v\n", r.err)
			}
			srv.stop()
			return r.code
		}
	}
}

// makeSocketDir creates the fresh private directory for the socket.
func makeSocketDir(env []string) (string, error) {
	base := os.TempDir()
	if home := codexHome(env); home != "" && within(base, home) {
		return "", fmt.Errorf("the temporary directory %s lies inside CODEX_HOME %s, where the app-server's socket must not go: unset TMPDIR or point it outside %s", base, home, home)
	}
	dir, err := os.MkdirTemp(base, "codex-app-server-")
	if err != nil {
		return "", fmt.Errorf("creating the app-server's directory in %s: %w", base, err)
	}
	// MkdirTemp asks for 0700, which a umask can only narrow; make sure.
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("making %s private: %w", dir, err)
	}
	if sock := filepath.Join(dir, "server.sock"); len(sock) > sockPathMax {
		os.RemoveAll(dir)
		return "", fmt.Errorf("the socket path %s is longer than a unix socket allows (%d bytes): point TMPDIR at a shorter directory", sock, sockPathMax)
	}
	return dir, nil
}

// codexHome is the CODEX_HOME that codex will use under env.
func codexHome(env []string) string {
	var home, codex string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "CODEX_HOME="); ok {
			codex = v
		} else if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	if codex != "" {
		return codex
	}
	if home != "" {
		return filepath.Join(home, ".codex")
	}
	return ""
}

// within reports whether path is root or lies inside it, after resolving
// the symbolic links of both where they exist.
func within(path, root string) bool {
	resolve := func(p string) string {
		p, _ = filepath.Abs(p)
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	rel, err := filepath.Rel(resolve(root), resolve(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func startStatus(err error) int {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		return ExitNotFound
	}
	return ExitCannotRun
}

func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
