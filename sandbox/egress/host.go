package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// maxSocketPath is the room in sockaddr_un.sun_path, less its NUL.
const maxSocketPath = 107

// Host is the proxy running on the host side of one jail.
type Host struct {
	// Dir is the fresh mode-0700 runtime directory: bind it into the jail.
	Dir string
	// SocketPath is the proxy's unix socket in Dir.
	SocketPath string

	proxy *Proxy
	ln    net.Listener
	done  chan error
	once  sync.Once
	stop  chan struct{}
}

// StartHost creates a fresh mode-0700 directory under runtimeDir, serves p
// on a unix socket in it, and returns once the socket accepts connections.
// It fails (and the agent must then not start) if any of that cannot be
// done. The Host owns p from then on: Close (or ctx ending) stops it,
// cuts every connection and removes the directory.
func StartHost(ctx context.Context, p *Proxy, runtimeDir string) (*Host, error) {
	if p == nil {
		return nil, errors.New("egress: no proxy to start")
	}
	if err := p.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("egress: not starting the proxy: %w", err)
	}
	if p.isClosed() {
		return nil, errors.New("egress: not starting the proxy: it was closed already")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("egress: not starting the proxy: %w", err)
	}
	fi, err := os.Stat(runtimeDir)
	if err != nil {
		return nil, fmt.Errorf("egress runtime directory: %w (create it, or point the launcher at a writable directory such as $XDG_RUNTIME_DIR)", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("egress runtime directory %s: not a directory", runtimeDir)
	}
	dir, err := os.MkdirTemp(runtimeDir, "cco-egress-")
	if err != nil {
		return nil, fmt.Errorf("egress runtime directory: %w", err)
	}
	fail := func(err error) (*Host, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	// MkdirTemp creates 0700 already; say so explicitly and verify, since the
	// directory's mode is the socket's only access control.
	if err := os.Chmod(dir, 0o700); err != nil {
		return fail(fmt.Errorf("egress runtime directory: %w", err))
	}
	if err := checkPrivateDir(dir); err != nil {
		return fail(err)
	}
	sock := filepath.Join(dir, SocketName)
	if len(sock) > maxSocketPath {
		return fail(fmt.Errorf("egress socket path %s is %d bytes, more than a unix socket allows (%d): use a shorter runtime directory", sock, len(sock), maxSocketPath))
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fail(fmt.Errorf("egress proxy: listening on %s: %w", sock, err))
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return fail(fmt.Errorf("egress proxy: %w", err))
	}
	h := &Host{Dir: dir, SocketPath: sock, proxy: p, ln: ln, done: make(chan error, 1), stop: make(chan struct{})}
	go func() { h.done <- p.Serve(ln) }()
	go func() {
		select {
		case <-ctx.Done():
			h.Close()
		case <-h.stop:
		}
	}()
	return h, nil
}

func checkPrivateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("egress runtime directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 || !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("egress runtime directory %s: not a private directory of uid %d (mode %v)", dir, os.Geteuid(), fi.Mode())
	}
	return nil
}

// Close stops the proxy, cuts its connections and removes Dir.
func (h *Host) Close() error {
	var err error
	h.once.Do(func() {
		close(h.stop)
		h.proxy.Close()
		h.ln.Close()
		if e := <-h.done; e != nil && !errors.Is(e, ErrClosed) {
			err = e
		}
		if e := os.RemoveAll(h.Dir); e != nil && err == nil {
			err = fmt.Errorf("egress: removing %s: %w", h.Dir, e)
		}
	})
	return err
}
