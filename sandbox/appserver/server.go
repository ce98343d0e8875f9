package appserver

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/cco-dev/cco/sandbox/jailinit"
)

// logTail is how much of the server's output is kept for the error message:
// the end, where the reason it failed is. Nothing goes to a file, so a long
// session cannot fill the jail's /tmp (a tmpfs) with the server's log.
const logTail = 64 << 10

// server is a running `codex app-server`.
type server struct {
	cmd      *exec.Cmd
	log      *tail
	exited   chan struct{}
	stopOnce sync.Once
	stopped  chan struct{}
}

func startServer(codex string, p plan, url string, env []string) (*server, error) {
	argv := append(append([]string{}, p.serverFlags...), "app-server", "--listen", url)
	cmd := exec.Command(codex, argv...)
	cmd.Env = env
	cmd.Dir = p.dir
	log := &tail{max: logTail}
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: keys typed at the client's terminal never
	// signal it, and stop reaches the helpers it starts.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A helper of the server that keeps its output pipe open must not keep
	// Run waiting.
	cmd.WaitDelay = time.Second
	// Through jailinit: where this process is the jail's pid 1, its
	// reaper leaves the server's status to the Wait below.
	release, err := jailinit.Start(cmd)
	if err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, log: log, exited: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		release()
		close(s.exited)
	}()
	return s, nil
}

// waitListening waits until the socket exists. It returns the signal that
// interrupted it, or an error when the server exited or did not listen in
// time.
func (s *server) waitListening(sock string, sigs <-chan os.Signal) (os.Signal, error) {
	deadline := time.NewTimer(listenTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		// A socket file is only there once the server bound it, and
		// Codex listens right after binding; a probe connection is
		// avoided, since the server would take it for a client.
		if st, err := os.Stat(sock); err == nil && st.Mode().Type() == fs.ModeSocket {
			return nil, nil
		}
		select {
		case sig := <-sigs:
			return sig, nil
		case <-s.exited:
			return nil, fmt.Errorf("the app-server (%s) exited with status %d before listening on unix://%s",
				s.cmd.Path, exitStatus(s.cmd.ProcessState), sock)
		case <-deadline.C:
			return nil, fmt.Errorf("the app-server (%s) did not listen on unix://%s within %s",
				s.cmd.Path, sock, listenTimeout)
		case <-tick.C:
		}
	}
}

// stop ends the server: SIGTERM to its process group, SIGKILL after
// killGrace. It is safe to call more than once and from several goroutines;
// every call returns once the server is gone.
func (s *server) stop() {
	s.stopOnce.Do(func() {
		defer close(s.stopped)
		select {
		case <-s.exited:
			// Reaped: its process group id may no longer be its own.
			return
		default:
		}
		pgid := s.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(killGrace)
		defer t.Stop()
		select {
		case <-s.exited:
		case <-t.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-s.exited
		}
	})
	<-s.stopped
}

// tail keeps the last max bytes written to it. It trims only when twice
// that has piled up, so that a chatty server costs a copy per max bytes, not
// per write.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > t.max {
		return string(t.buf[len(t.buf)-t.max:])
	}
	return string(t.buf)
}
