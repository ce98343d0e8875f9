// Package sshagent is SSH in the jail, opt-in (sandbox.toml's ssh_agent):
// the user's ssh-agent socket bound at a private path, and an ssh config
// whose ProxyCommand carries each connection to an ssh_hosts host through
// the egress proxy, which allows port 22 to those hosts alone and records
// each connection (docs/adr/0132-ssh-through-the-egress-proxy.md).
package sshagent

import (
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// SocketPath is where, in the jail, the user's ssh-agent socket is: under
// the jail's private /run, named by SSH_AUTH_SOCK there.
const SocketPath = "/run/cco/ssh-agent.sock"

// Port is SSH's: the egress proxy allows it to ssh_hosts only.
const Port = 22

// CheckSocket checks the host's SSH_AUTH_SOCK: a unix socket (not a link
// to one) owned by uid, so that the variable cannot hand the jail another
// service's socket (a container engine's is root's).
func CheckSocket(path string, uid int) error {
	if path == "" {
		return fmt.Errorf("ssh_agent = true, but SSH_AUTH_SOCK is not set: the jail gets no ssh-agent (fix: eval $(ssh-agent) && ssh-add, then start the agent again)")
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("ssh_agent = true, but SSH_AUTH_SOCK %s: %v: the jail gets no ssh-agent (fix: start ssh-agent, or correct SSH_AUTH_SOCK)", path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSocket == 0:
		return fmt.Errorf("ssh_agent = true, but SSH_AUTH_SOCK %s is not a unix socket (%v): the jail gets no ssh-agent (fix: point SSH_AUTH_SOCK at the agent's socket itself)", path, fi.Mode().Type())
	case !ok || int(st.Uid) != uid:
		return fmt.Errorf("ssh_agent = true, but SSH_AUTH_SOCK %s is not a socket of yours: the jail gets no ssh-agent (fix: point SSH_AUTH_SOCK at your own ssh-agent's socket)", path)
	}
	return nil
}

// Config is the jail's ~/.ssh/config: for the hosts, a ProxyCommand that
// is the in-jail helper's connect mode (a CONNECT host:22 through the
// agent's proxy endpoint), the agent socket, and the host's known_hosts
// (read-only: strict checking, no updates). Other hosts get no way out.
func Config(helper string, hosts []string, knownHosts string) string {
	var b strings.Builder
	b.WriteString("# Written by cco for this jail (ssh_agent = true in /etc/cco/sandbox.toml): ssh_hosts go\n")
	b.WriteString("# through the egress proxy; no other host is reachable.\n")
	if len(hosts) > 0 {
		fmt.Fprintf(&b, "Host %s\n", strings.Join(hosts, " "))
		fmt.Fprintf(&b, "    ProxyCommand %s connect %%h %%p\n", helper)
		fmt.Fprintf(&b, "    IdentityAgent %s\n", SocketPath)
		fmt.Fprintf(&b, "    UserKnownHostsFile %s\n", knownHosts)
		b.WriteString("    StrictHostKeyChecking yes\n    UpdateHostKeys no\n")
	}
	return b.String()
}

// Relay is the jail's private agent socket: a socket of the launcher's,
// beside the egress proxy's, whose every connection the launcher carries
// to the user's agent. The agent then sees the launcher, the user's own
// process, as its peer (root's jail runs as a mapped uid, whose
// connections root's ssh-agent would refuse), and the jail never sees the
// host's socket path.
type Relay struct {
	// Path is the relay's socket, bound at SocketPath in the jail.
	Path string

	upstream string
	ln       net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
}

// StartRelay listens at path (mode 0600) and carries each connection to
// the agent socket upstream.
func StartRelay(path, upstream string) (*Relay, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("ssh_agent: the jail's agent socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("ssh_agent: the jail's agent socket %s: %w", path, err)
	}
	r := &Relay{Path: path, upstream: upstream, ln: ln, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if r.isClosed() {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		u, err := net.Dial("unix", r.upstream)
		if err != nil || !r.track(c, u) {
			c.Close()
			if u != nil {
				u.Close()
			}
			continue
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.untrack(c, u)
			done := make(chan struct{})
			go func() { io.Copy(u, c); u.(*net.UnixConn).CloseWrite(); close(done) }()
			io.Copy(c, u)
			c.(*net.UnixConn).CloseWrite()
			<-done
		}()
	}
}

func (r *Relay) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

func (r *Relay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *Relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(r.conns, c)
	}
}

// Close stops the relay, cuts its connections and removes its socket.
func (r *Relay) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.ln.Close()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	os.Remove(r.Path)
}
