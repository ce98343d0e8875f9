package sshagent

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CheckSocket refuses an unset variable, a missing path, a file, a link
// to the agent's socket and another user's socket, each naming the fix.
func TestCheckSocket(t *testing.T) {
	d, err := os.MkdirTemp("/tmp", "sshag")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(d)
	sock := filepath.Join(d, "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := CheckSocket(sock, os.Geteuid()); err != nil {
		t.Fatalf("the user's own socket: %v", err)
	}
	file := filepath.Join(d, "file")
	os.WriteFile(file, nil, 0o600)
	link := filepath.Join(d, "link")
	os.Symlink(sock, link)
	for _, tc := range []struct {
		path string
		uid  int
		want string
	}{
		{"", os.Geteuid(), "SSH_AUTH_SOCK is not set"},
		{filepath.Join(d, "missing"), os.Geteuid(), "no such file"},
		{file, os.Geteuid(), "is not a unix socket"},
		{link, os.Geteuid(), "is not a unix socket"},
		{sock, os.Geteuid() + 1, "is not a socket of yours"},
	} {
		err := CheckSocket(tc.path, tc.uid)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fix:") {
			t.Errorf("%s (uid %d): %v, want %q and a fix", tc.path, tc.uid, err, tc.want)
		}
	}
}

// The relay carries a connection to the agent's socket and back, and
// removes its socket when closed.
func TestRelay(t *testing.T) {
	d, err := os.MkdirTemp("/tmp", "sshag")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(d)
	up, err := net.Listen("unix", filepath.Join(d, "agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		c, err := up.Accept()
		if err == nil {
			b := make([]byte, 5)
			n, _ := c.Read(b)
			c.Write(append([]byte("re:"), b[:n]...))
			c.Close()
		}
	}()
	r, err := StartRelay(filepath.Join(d, "relay.sock"), filepath.Join(d, "agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(r.Path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the relay's socket: %v %v", fi, err)
	}
	c, err := net.Dial("unix", r.Path)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("hello"))
	b := make([]byte, 16)
	n, _ := c.Read(b)
	if string(b[:n]) != "re:hello" {
		t.Errorf("through the relay: %q", b[:n])
	}
	c.Close()
	r.Close()
	if _, err := os.Stat(r.Path); err == nil {
		t.Error("the relay's socket is left behind")
	}
}

func TestConfig(t *testing.T) {
	c := Config("/usr/libexec/cco/sandbox-helper", []string{"github.com", "git.corp.example"}, "/home/u/.ssh/known_hosts")
	for _, want := range []string{"Host github.com git.corp.example\n", "ProxyCommand /usr/libexec/cco/sandbox-helper connect %h %p\n",
		"IdentityAgent " + SocketPath, "UserKnownHostsFile /home/u/.ssh/known_hosts", "StrictHostKeyChecking yes"} {
		if !strings.Contains(c, want) {
			t.Errorf("the ssh config lacks %q:\n%s", want, c)
		}
	}
}
