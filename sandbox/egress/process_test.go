package egress

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// processInputs are what the shadow hands the egress-proxy process: the
// policy's line, the listening socket's file and the audit log's files.
func processInputs(t *testing.T) (line []byte, sock string, ln, lock, log *os.File, pol Policy) {
	t.Helper()
	dir := shortTempDir(t)
	pol, err := ParsePolicy(map[string]any{"egress_log": filepath.Join(dir, "audit.log")}, "claude", dir)
	if err != nil {
		t.Fatal(err)
	}
	if line, err = pol.Encode(); err != nil {
		t.Fatal(err)
	}
	sock = filepath.Join(dir, "p.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	// The file is a copy: closing the listener must leave the socket's path.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	defer l.Close()
	if ln, err = l.(*net.UnixListener).File(); err != nil {
		t.Fatal(err)
	}
	if lock, log, err = pol.OpenLog(); err != nil {
		t.Fatal(err)
	}
	return line, sock, ln, lock, log, pol
}

// TestServeProcess: the process serves the policy it was handed on the
// socket it inherited, says so, writes the audit log it inherited, and
// stops at the end of its input.
func TestServeProcess(t *testing.T) {
	line, sock, ln, lock, log, pol := processInputs(t)
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	done := make(chan error, 1)
	go func() { done <- ServeProcess("s1", inR, outW, Files{Listener: ln, AuditLock: lock, AuditLog: log}) }()
	inW.Write(line)
	first, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || first != ReadyLine+"\n" {
		t.Fatalf("first line %q, %v; want %q", first, err, ReadyLine)
	}
	// Loopback is refused by the policy itself: no dial is attempted.
	resp, _ := tunnel(t, "unix", sock, "127.0.0.1:443")
	if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get(ReasonHeader), "loopback") {
		t.Errorf("CONNECT 127.0.0.1:443: %d %q, want 403 for loopback", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeProcess: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy did not stop at the end of its input")
	}
	entries, err := ReadAudit(pol.LogPath)
	if err != nil || len(entries) != 1 || entries[0].Session != "s1" || entries[0].Target != "127.0.0.1:443" {
		t.Errorf("audit %+v, %v; want the one refusal of session s1", entries, err)
	}
	if c, err := net.Dial("unix", sock); err == nil {
		c.Close()
		t.Error("the socket still accepts connections after the proxy stopped")
	}
}

// TestServeProcessRefusesBadInput: whatever the shadow did not hand it as
// the protocol says is an error, and nothing is served.
func TestServeProcessRefusesBadInput(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	tcpFile, err := tcp.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(line []byte, ln, lock, log *os.File) ([]byte, *os.File, *os.File, *os.File)
		want string
	}{
		{"no policy", func(_ []byte, ln, lock, log *os.File) ([]byte, *os.File, *os.File, *os.File) {
			return nil, ln, lock, log
		}, "reading the policy"},
		{"garbage", func(_ []byte, ln, lock, log *os.File) ([]byte, *os.File, *os.File, *os.File) {
			return []byte("egress = public\n"), ln, lock, log
		}, "decoding the egress policy"},
		{"unknown field", func(_ []byte, ln, lock, log *os.File) ([]byte, *os.File, *os.File, *os.File) {
			return []byte(`{"Mode":"public","Ports":[443],"LogPath":"/tmp/x.log","Open":true}` + "\n"), ln, lock, log
		}, "unknown field"},
		{"off", func(_ []byte, ln, lock, log *os.File) ([]byte, *os.File, *os.File, *os.File) {
			return []byte(`{"Mode":"off","LogPath":"/tmp/x.log"}` + "\n"), ln, lock, log
		}, "egress is off"},
		{"bad rule", func(_ []byte, ln, lock, log *os.File) ([]byte, *os.File, *os.File, *os.File) {
			return []byte(`{"Mode":"allowlist","Allow":["exa mple.com"],"LogPath":"/tmp/x.log"}` + "\n"), ln, lock, log
		}, "not a host rule"},
		{"no listener", func(line []byte, _, lock, log *os.File) ([]byte, *os.File, *os.File, *os.File) {
			return line, nil, lock, log
		}, "descriptor 3"},
		{"tcp listener", func(line []byte, _, lock, log *os.File) ([]byte, *os.File, *os.File, *os.File) {
			return line, tcpFile, lock, log
		}, "not a unix socket"},
		{"no audit log", func(line []byte, ln, lock, _ *os.File) ([]byte, *os.File, *os.File, *os.File) {
			return line, ln, lock, nil
		}, "descriptor 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, _, ln, lock, log, _ := processInputs(t)
			line, ln, lock, log = tc.edit(line, ln, lock, log)
			out := &strings.Builder{}
			err := ServeProcess("s", strings.NewReader(string(line)), out, Files{Listener: ln, AuditLock: lock, AuditLog: log})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("said %q before failing", out.String())
			}
		})
	}
}
