package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cco-dev/cco/internal/testenv"
)

// gitSSH is a company's git server over SSH in the test's namespace: it
// takes one user key, runs `git-receive-pack` and `git-upload-pack` on its
// bare repository and answers any other command with a greeting, and logs
// every authentication and command.
type gitSSH struct {
	addr    string
	hostKey ssh.PublicKey
	bare    string

	mu  sync.Mutex
	log []string
}

func newGitSSH(t *testing.T, n *companyNet, user ssh.PublicKey, bare string) *gitSSH {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	g := &gitSSH{hostKey: signer.PublicKey(), bare: bare}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(c ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		ok := bytes.Equal(k.Marshal(), user.Marshal())
		g.note(fmt.Sprintf("auth %s %s %v", c.User(), ssh.FingerprintSHA256(k), ok))
		if !ok {
			return nil, fmt.Errorf("unknown key")
		}
		return nil, nil
	}}
	cfg.AddHostKey(signer)
	l := n.listen(t, "tcp4", "127.0.0.1:0")
	g.addr = l.Addr().String()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go g.serve(c, cfg)
		}
	}()
	return g
}

func (g *gitSSH) note(s string) {
	g.mu.Lock()
	g.log = append(g.log, s)
	g.mu.Unlock()
}

func (g *gitSSH) entries() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.log...)
}

func (g *gitSSH) serve(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go func() {
			defer ch.Close()
			for r := range creqs {
				if r.Type != "exec" {
					r.Reply(r.Type == "env", nil)
					continue
				}
				cmdline := string(r.Payload[4:])
				r.Reply(true, nil)
				g.note("exec " + cmdline)
				status := g.run(cmdline, ch)
				var b [4]byte
				binary.BigEndian.PutUint32(b[:], uint32(status))
				ch.SendRequest("exit-status", false, b[:])
				return
			}
		}()
	}
}

func (g *gitSSH) run(cmdline string, ch ssh.Channel) int {
	prog, _, _ := strings.Cut(cmdline, " ")
	if prog != "git-receive-pack" && prog != "git-upload-pack" {
		fmt.Fprintf(ch, "hello from git.corp.test: %s\n", cmdline)
		return 0
	}
	c := exec.Command("git", strings.TrimPrefix(prog, "git-"), g.bare)
	c.Stdin, c.Stdout, c.Stderr = ch, ch, ch.Stderr()
	if err := c.Run(); err != nil {
		return 1
	}
	return 0
}

// userAgent starts an ssh-agent as u with key, on a socket u owns.
func userAgent(t *testing.T, u runAs, dir string) (sock string, pub ssh.PublicKey) {
	t.Helper()
	key := filepath.Join(dir, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "cco-test", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	b, _ := os.ReadFile(key + ".pub")
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{dir, key, key + ".pub"} {
		testenv.Must(t, os.Chown(f, u.uid, u.gid))
	}
	sock = filepath.Join(dir, "agent.sock")
	as := func(name string, args ...string) *exec.Cmd {
		c := exec.Command(name, args...)
		c.Env = []string{"SSH_AUTH_SOCK=" + sock, "PATH=/usr/bin:/bin"}
		if u.uid != 0 {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}}
		}
		return c
	}
	agent := as("ssh-agent", "-D", "-a", sock)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("ssh-agent made no socket")
		}
	}
	if out, err := as("ssh-add", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v %s", err, out)
	}
	return sock, pub
}

// TestSSHThroughTheEgressProxy: with ssh_agent on, the user's ssh-agent is
// usable in the jail through its private socket, and ssh and git push
// over SSH reach the ssh_hosts host on port 22 through the egress proxy
// (here behind the company's proxy), with the host's known_hosts; another
// host's port 22 is refused before the company proxy sees it; each
// connection is in the audit log. Without ssh_agent, no socket and no
// SSH_AUTH_SOCK. As uid 65534 and as root; the verdicts are the SSH
// server's log, the company proxy's, and the bare repository on the host.
func TestSSHThroughTheEgressProxy(t *testing.T) {
	root := systemRoot(t)
	n := newCompanyNet(t)
	for _, u := range []runAs{asNobody, asRoot} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			adir := filepath.Join(w.base, "agent")
			testenv.Must(t, os.MkdirAll(adir, 0o700))
			sock, pub := userAgent(t, u, adir)
			bare := filepath.Join(w.base, "repo.git")
			if out, err := exec.Command("git", "init", "-q", "--bare", "-b", "main", bare).CombinedOutput(); err != nil {
				t.Fatalf("git init: %v %s", err, out)
			}
			srv := newGitSSH(t, n, pub, bare)
			corp := newCorpProxy(t, n, "ada", "pw", map[string]string{"git.corp.test": srv.addr, "evil.corp.test": srv.addr})
			testenv.Must(t, os.MkdirAll(filepath.Join(w.home, ".ssh"), 0o700))
			known := "git.corp.test " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(srv.hostKey))) + "\n"
			testenv.Must(t, os.WriteFile(filepath.Join(w.home, ".ssh/known_hosts"), []byte(known), 0o600))
			testenv.Must(t, os.WriteFile(filepath.Join(w.home, ".ssh/id_host_secret"), []byte("HOST-PRIVATE-KEY"), 0o600))
			for _, p := range []string{".ssh", ".ssh/known_hosts", ".ssh/id_host_secret"} {
				testenv.Must(t, os.Chown(filepath.Join(w.home, p), u.uid, u.gid))
			}
			withConfig(t, root, fmt.Sprintf("ssh_agent = true\nssh_hosts = [\"git.corp.test\"]\negress_upstream = \"http://ada:pw@%s\"\n", corp.addr))
			// ssh takes ~ from the password database, where these test
			// users' homes are not: -F names the jail's config (git's
			// GIT_SSH_COMMAND, which the jail sets, does the same).
			script := fmt.Sprintf(`set -u
echo "sock=$SSH_AUTH_SOCK"
ssh-add -l | sed 's/^/key: /'
ssh -F "$HOME/.ssh/config" -o BatchMode=yes git@git.corp.test greet-me
cat ~/.ssh/id_host_secret 2>/dev/null || echo "no host key file"
git init -q -b main p && cd p && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m "from the jail" &&
  git push -q ssh://git@git.corp.test/repo.git main && echo pushed
ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=no -o "ProxyCommand=%s connect %%h %%p" git@evil.corp.test greet-me || echo "evil refused"
`, root+"/usr/libexec/cco/sandbox-helper")
			c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "sh", "script": script}))
			for i, kv := range c.Env {
				if strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
					c.Env[i] = "SSH_AUTH_SOCK=" + sock
				}
			}
			n.wrap(c, u)
			r := runCmd(t, c)
			t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			for _, want := range []string{"sock=/run/cco/ssh-agent.sock", "key: 256 " + ssh.FingerprintSHA256(pub), "hello from git.corp.test: greet-me",
				"no host key file", "pushed", "evil refused"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the jail's output lacks %q", want)
				}
			}
			if strings.Contains(r.stdout, "HOST-PRIVATE-KEY") {
				t.Error("the host's ~/.ssh is readable in the jail")
			}
			if !strings.Contains(r.stderr, "the egress proxy refused the tunnel to evil.corp.test:22: port 22 is not in egress_ports") {
				t.Errorf("ssh to evil.corp.test: no refusal on stderr")
			}
			out, err := exec.Command("git", "-C", bare, "log", "--format=%s", "main").CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "from the jail" {
				t.Errorf("the bare repository on the host: %q %v", out, err)
			}
			slog := strings.Join(srv.entries(), "\n")
			if !strings.Contains(slog, "auth git "+ssh.FingerprintSHA256(pub)+" true") || !strings.Contains(slog, "exec greet-me") ||
				!strings.Contains(slog, "exec git-receive-pack '/repo.git'") {
				t.Errorf("the SSH server's log:\n%s", slog)
			}
			for _, l := range corp.requests() {
				if strings.Contains(l, "evil.corp.test") {
					t.Errorf("a refused ssh host reached the company proxy: %s", l)
				}
			}
			audit := readFile(t, filepath.Join(w.home, ".local/state/cco/egress.log"))
			if strings.Count(audit, `"target":"git.corp.test:22"`) < 2 || !strings.Contains(audit, `"target":"evil.corp.test:22","allowed":false`) {
				t.Errorf("the audit log:\n%s", audit)
			}

			// Without ssh_agent: no socket, no SSH_AUTH_SOCK.
			withConfig(t, root, "")
			c = w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "sh", "script": `echo "sock=[${SSH_AUTH_SOCK:-}]"; test -e /run/cco/ssh-agent.sock && echo socket || echo "no socket"; test -e ~/.ssh/config && echo config || echo "no config"`}))
			for i, kv := range c.Env {
				if strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
					c.Env[i] = "SSH_AUTH_SOCK=" + sock
				}
			}
			n.wrap(c, u)
			r = runCmd(t, c)
			if !strings.Contains(r.stdout, "sock=[]") || !strings.Contains(r.stdout, "no socket") || !strings.Contains(r.stdout, "no config") {
				t.Errorf("without ssh_agent:\n%s\n%s", r.stdout, r.stderr)
			}
		})
	}
}
