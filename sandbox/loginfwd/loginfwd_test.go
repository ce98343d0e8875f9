package loginfwd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/testenv"
)

// The test binary is also the jailed "agent" (jailMode), the dialer
// nsenter starts (DialMode), as the shadow is, and a host client run as
// another user (clientMode).
const (
	jailMode   = "fake-jail"
	clientMode = "client"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case DialMode:
			os.Exit(DialMain(os.Args[2:]))
		case jailMode:
			os.Exit(fakeJail(os.Args[2:]))
		case clientMode:
			tag, err := ask(os.Args[2])
			if err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
			fmt.Println(tag)
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// fakeJail listens on each address given and answers every connection
// with the address's tag ("tag=addr"); a line "close <tag>" on stdin
// closes that listener, and "ok <tag>" is printed once it is closed.
func fakeJail(args []string) int {
	lns := map[string]net.Listener{}
	for _, a := range args {
		tag, addr, _ := strings.Cut(a, "=")
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		lns[tag] = ln
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(c, "%s\n", tag)
				c.Close()
			}
		}()
	}
	fmt.Println("listening")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if tag, ok := strings.CutPrefix(sc.Text(), "close "); ok {
			lns[tag].Close()
			fmt.Println("ok", tag)
		}
	}
	return 0
}

func TestParseTCP(t *testing.T) {
	v4 := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:05AF 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0
   2: 0100007F:05AF 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0
`)
	got, err := parseTCP(v4, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []Listening{{netip.MustParseAddrPort("127.0.0.1:1455")}, {netip.MustParseAddrPort("0.0.0.0:8080")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tcp: got %v, want %v (the established line is not a listener)", got, want)
	}
	v6 := []byte(`  sl  local_address                         remote_address                        st
   0: 00000000000000000000000001000000:05B1 00000000000000000000000000000000:0000 0A 0
   1: 0000000000000000FFFF00000100007F:0050 00000000000000000000000000000000:0000 0A 0
   2: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 0
`)
	got, err = parseTCP(v6, true)
	if err != nil {
		t.Fatal(err)
	}
	want = []Listening{{netip.MustParseAddrPort("[::1]:1457")}, {netip.MustParseAddrPort("[::ffff:127.0.0.1]:80")}, {netip.MustParseAddrPort("[::]:22")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tcp6: got %v, want %v", got, want)
	}
	if _, err := parseTCP([]byte("h\n 0: 7F:zz 0:0 0A\n"), false); err == nil {
		t.Error("a bad address was accepted")
	}
}

func TestWantOnlyLoginPortsOnLoopback(t *testing.T) {
	ap := netip.MustParseAddrPort
	ls := []Listening{
		{ap("127.0.0.1:1455")},  // the login server
		{ap("127.0.0.1:38071")}, // the egress bridge, or anything else
		{ap("0.0.0.0:3000")},    // a dev server the agent started
		{ap("10.0.0.7:1457")},   // a login port, but not on loopback
		{ap("[::]:1457")},       // and on the IPv6 wildcard
	}
	got := Want(ls, []int{1455, 1457})
	want := map[netip.AddrPort]netip.AddrPort{
		ap("127.0.0.1:1455"): ap("127.0.0.1:1455"),
		ap("127.0.0.1:1457"): ap("[::1]:1457"),
		ap("[::1]:1457"):     ap("[::1]:1457"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// An IPv4 listener wins the host's 127.0.0.1 over the IPv6 wildcard,
	// whichever comes first.
	got = Want([]Listening{{ap("[::]:1457")}, {ap("0.0.0.0:1457")}}, []int{1457})
	if got[ap("127.0.0.1:1457")] != ap("127.0.0.1:1457") {
		t.Errorf("IPv4 wildcard with IPv6 wildcard: %v", got)
	}
	if got := Want(ls, nil); len(got) != 0 {
		t.Errorf("no login ports: %v", got)
	}
}

// jail is the fake agent in a network namespace of its own.
type jail struct {
	pid int
	in  io.WriteCloser
	out *bufio.Reader
	cmd *exec.Cmd
}

// freePort is a port nothing on the host listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startJail runs the fake agent under bwrap with a network namespace of
// its own (only lo), listening on each tag=addr; the pid is bwrap's
// child-pid, as the shadow gets it.
func startJail(t testing.TB, listen ...string) *jail {
	t.Helper()
	bwrap := testenv.RequireBwrap(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stR.Close()
	args := []string{"--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-net",
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--json-status-fd", "3", "--", exe, jailMode}
	c := exec.Command(bwrap, append(args, listen...)...)
	c.ExtraFiles = []*os.File{stW}
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	stW.Close()
	j := &jail{in: in, out: bufio.NewReader(outR), cmd: c}
	t.Cleanup(func() { in.Close(); c.Process.Kill(); c.Wait() })
	sc := bufio.NewScanner(stR)
	for j.pid == 0 && sc.Scan() {
		var st struct {
			ChildPID int `json:"child-pid"`
		}
		if json.Unmarshal(sc.Bytes(), &st) == nil {
			j.pid = st.ChildPID
		}
	}
	if j.pid == 0 {
		t.Fatal("bwrap reported no child-pid")
	}
	if l := j.line(t); l != "listening" {
		t.Fatalf("the fake agent: %q", l)
	}
	return j
}

func (j *jail) line(t testing.TB) string {
	t.Helper()
	l, err := j.out.ReadString('\n')
	if err != nil {
		t.Fatalf("the fake agent's output: %v", err)
	}
	return strings.TrimSpace(l)
}

// ask connects to the host's addr and returns the tag the jail answers,
// or the dial error.
func ask(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	return strings.TrimSpace(string(b)), err
}

// eventually retries f for up to 3 seconds.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	var err error
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if err = f(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

func dialers(t testing.TB) map[string]Dialer {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := map[string]Dialer{"nsenter": &Nsenter{Program: exe, Args: []string{DialMode}}}
	if os.Geteuid() == 0 {
		d["setns"] = Setns{}
	}
	return d
}

// TestForwardsOnlyTheLoginListener: the jail's login listener is reachable
// from the host's loopback while it listens, and only then; another
// listener of the jail (here on a port free on the host too) never is.
func TestForwardsOnlyTheLoginListener(t *testing.T) {
	testenv.RequireRoot(t)
	for name, d := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			login, other, wild := freePort(t), freePort(t), freePort(t)
			j := startJail(t, fmt.Sprintf("login=127.0.0.1:%d", login), fmt.Sprintf("other=127.0.0.1:%d", other),
				fmt.Sprintf("wild=0.0.0.0:%d", wild))
			var warn bytes.Buffer
			stop := Start(context.Background(), j.pid, []int{login}, Options{Dialer: d, Interval: 20 * time.Millisecond, Warn: &warn, UID: os.Getuid()})
			defer stop()
			host := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
			eventually(t, "the login listener from the host", func() error {
				tag, err := ask(host(login))
				if err == nil && tag != "login" {
					err = fmt.Errorf("answered %q", tag)
				}
				return err
			})
			for i := 0; i < 3; i++ { // each connection is carried on its own
				if tag, err := ask(host(login)); err != nil || tag != "login" {
					t.Fatalf("connection %d: %q, %v", i, tag, err)
				}
			}
			for _, p := range []int{other, wild} {
				if _, err := ask(host(p)); !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("the jail's other listener on %d from the host: %v, want connection refused", p, err)
				}
			}
			fmt.Fprintln(j.in, "close login")
			if l := j.line(t); l != "ok login" {
				t.Fatalf("the fake agent: %q", l)
			}
			eventually(t, "the host port closing with the jail's listener", func() error {
				if _, err := ask(host(login)); !errors.Is(err, syscall.ECONNREFUSED) {
					return fmt.Errorf("still answers: %v", err)
				}
				return nil
			})
			if warn.Len() > 0 {
				t.Errorf("warnings: %s", warn.String())
			}
		})
	}
}

// TestStopsWithTheJail: the forwarder ends once the jail's process is
// gone, and its host listener with it.
func TestStopsWithTheJail(t *testing.T) {
	testenv.RequireRoot(t)
	login := freePort(t)
	j := startJail(t, fmt.Sprintf("login=127.0.0.1:%d", login))
	stop := Start(context.Background(), j.pid, []int{login}, Options{Dialer: Setns{}, Interval: 20 * time.Millisecond, UID: os.Getuid()})
	defer stop()
	addr := "127.0.0.1:" + strconv.Itoa(login)
	eventually(t, "the login listener", func() error { _, err := ask(addr); return err })
	j.in.Close()
	j.cmd.Wait()
	eventually(t, "the host port closing after the jail ended", func() error {
		if _, err := ask(addr); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("still answers: %v", err)
		}
		return nil
	})
}

// TestPortTakenOnTheHost: a login port some host program holds is left to
// it, and said once.
func TestPortTakenOnTheHost(t *testing.T) {
	testenv.RequireRoot(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	j := startJail(t, fmt.Sprintf("login=127.0.0.1:%d", port))
	var warn testenv.SyncBuffer
	stop := Start(context.Background(), j.pid, []int{port}, Options{Dialer: Setns{}, Interval: 20 * time.Millisecond, Warn: &warn, Agent: "codex"})
	time.Sleep(200 * time.Millisecond)
	stop()
	w := warn.String()
	if strings.Count(w, "cco: ") != 1 || !strings.Contains(w, "codex") || !strings.Contains(w, "127.0.0.1:"+strconv.Itoa(port)) {
		t.Errorf("warning %q: want one line naming codex and the address", w)
	}
}

func TestDialMainRefusesOffLoopback(t *testing.T) {
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	c := exec.Command(exe, DialMode, "192.0.2.1:80")
	c.ExtraFiles = []*os.File{os.NewFile(uintptr(pair[1]), "child")}
	if err := c.Run(); err == nil {
		t.Error("the dialer accepted an address off loopback")
	}
	c.ExtraFiles[0].Close()
	mine := os.NewFile(uintptr(pair[0]), "mine")
	defer mine.Close()
	if _, err := receiveConn(mine); err == nil || !strings.Contains(err.Error(), "not a loopback") {
		t.Errorf("answer: %v", err)
	}
}

// BenchmarkDial is the cost of one carried connection's way into the
// jail, by each dialer (docs/adr/0054-login-callback-forwarding.md).
func BenchmarkDial(b *testing.B) {
	testenv.RequireRoot(b)
	login := freePort(b)
	j := startJail(b, fmt.Sprintf("login=127.0.0.1:%d", login))
	target := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(login))
	for name, d := range dialers(b) {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c, err := d.Dial(context.Background(), j.pid, target)
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}

func TestOwnerIn(t *testing.T) {
	table := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:05AF 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:05AF 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0
   2: 0100007F:D2A4 0100007F:05AF 01 00000000:00000000 00:00000000 00000000 65534        0 4 1 0 100 0 0 10 0
   3: 0100007F:D2A5 0100007F:05AF 01 00000000:00000000 00:00000000 00000000  1000        0 5 1 0 100 0 0 10 0
`)
	ap := netip.MustParseAddrPort
	login := ap("127.0.0.1:1455")
	for peer, want := range map[string]int{"127.0.0.1:53924": 65534, "127.0.0.1:53925": 1000} {
		if uid, err := ownerIn(table, ap(peer), login, false); err != nil || uid != want {
			t.Errorf("%s: uid %d, %v; want %d", peer, uid, err, want)
		}
	}
	// The forwarder's own end (local 1455) is never taken for the peer's.
	if uid, err := ownerIn(table, ap("127.0.0.1:53926"), login, false); err == nil {
		t.Errorf("a peer not in the table: uid %d", uid)
	}
	v6 := []byte("sl local remote st\n 0: 00000000000000000000000001000000:D2A4 00000000000000000000000001000000:05B1 01 0:0 0:0 0 1001 0 7\n")
	if uid, err := ownerIn(v6, ap("[::1]:53924"), ap("[::1]:1457"), true); err != nil || uid != 1001 {
		t.Errorf("tcp6: uid %d, %v", uid, err)
	}
}

// clientAs asks the host's addr as uid, from a copy of this test binary
// that uid may run, and returns the tag the jail answered ("" when the
// connection was closed unanswered).
func clientAs(t *testing.T, uid int, addr string) string {
	t.Helper()
	c := exec.Command(clientBinary(t), clientMode, addr)
	if uid != os.Getuid() {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("the client as uid %d: %v: %s", uid, err, out)
	}
	return strings.TrimSpace(string(out))
}

var clientCopy struct {
	once sync.Once
	path string
	err  error
}

// clientBinary is this test binary, copied where every user may run it.
func clientBinary(t *testing.T) string {
	clientCopy.once.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			clientCopy.err = err
			return
		}
		dir, err := os.MkdirTemp("", "cco-loginfwd-client-")
		if err != nil {
			clientCopy.err = err
			return
		}
		os.Chmod(dir, 0o755)
		b, err := os.ReadFile(exe)
		if err == nil {
			clientCopy.path = filepath.Join(dir, "client")
			err = os.WriteFile(clientCopy.path, b, 0o755)
		}
		clientCopy.err = err
	})
	if clientCopy.err != nil {
		t.Fatal(clientCopy.err)
	}
	return clientCopy.path
}

// TestOnlyTheInvokingUser: the forwarder carries the connections of the
// invoking user alone; another user's, and root's when root is not the
// invoking user, are closed before they reach the jail, and said.
func TestOnlyTheInvokingUser(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tc := range []struct {
		name    string
		invoker int
		others  []int
	}{
		{"invoked by uid 65533", 65533, []int{65534, 0}},
		{"invoked by root", 0, []int{65534, 65533}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			login := freePort(t)
			j := startJail(t, fmt.Sprintf("login=127.0.0.1:%d", login))
			var warn testenv.SyncBuffer
			stop := Start(context.Background(), j.pid, []int{login}, Options{Dialer: Setns{}, Interval: 20 * time.Millisecond,
				Warn: &warn, Agent: "codex", UID: tc.invoker})
			defer stop()
			addr := "127.0.0.1:" + strconv.Itoa(login)
			eventually(t, "the host listener", func() error {
				c, err := net.Dial("tcp4", addr)
				if err == nil {
					c.Close()
				}
				return err
			})
			if got := clientAs(t, tc.invoker, addr); got != "login" {
				t.Errorf("the invoking user (uid %d) got %q, want the jail's answer", tc.invoker, got)
			}
			for _, uid := range tc.others {
				if got := clientAs(t, uid, addr); got != "" {
					t.Errorf("LEAK: uid %d reached the jail's login server: %q", uid, got)
				}
				if w := warn.String(); !strings.Contains(w, fmt.Sprintf("from uid %d:", uid)) {
					t.Errorf("no warning names uid %d: %q", uid, w)
				}
			}
			if got := clientAs(t, tc.invoker, addr); got != "login" {
				t.Errorf("the invoking user after the others: %q", got)
			}
		})
	}
}

// TestFlowEndsWithTheLoginState: once the login state changes (the login
// is done), the host port closes, though the jail still listens.
func TestFlowEndsWithTheLoginState(t *testing.T) {
	testenv.RequireRoot(t)
	state := filepath.Join(t.TempDir(), "auth.json")
	login := freePort(t)
	j := startJail(t, fmt.Sprintf("login=127.0.0.1:%d", login))
	stop := Start(context.Background(), j.pid, []int{login}, Options{Dialer: Setns{}, Interval: 20 * time.Millisecond,
		UID: os.Getuid(), State: state})
	defer stop()
	addr := "127.0.0.1:" + strconv.Itoa(login)
	eventually(t, "the login listener", func() error {
		tag, err := ask(addr)
		if err == nil && tag != "login" {
			err = fmt.Errorf("answered %q", tag)
		}
		return err
	})
	if err := os.WriteFile(state, []byte(`{"tokens":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the host port closing once the login state is written", func() error {
		if _, err := ask(addr); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("still answers: %v", err)
		}
		return nil
	})
	time.Sleep(100 * time.Millisecond)
	if _, err := ask(addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("the host port opened again after the login: %v", err)
	}
}

// TestStateChangedBeforeTheCallback: the agent rewriting its login state
// at its start (a stale or broken file) does not end the login before any
// callback came: the flow ends only on a change after one did.
func TestStateChangedBeforeTheCallback(t *testing.T) {
	testenv.RequireRoot(t)
	state := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(state, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	login := freePort(t)
	j := startJail(t, fmt.Sprintf("login=127.0.0.1:%d", login))
	stop := Start(context.Background(), j.pid, []int{login}, Options{Dialer: Setns{}, Interval: 20 * time.Millisecond,
		UID: os.Getuid(), State: state})
	defer stop()
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	addr := "127.0.0.1:" + strconv.Itoa(login)
	eventually(t, "the login listener after the state changed with no callback yet", func() error {
		tag, err := ask(addr)
		if err == nil && tag != "login" {
			err = fmt.Errorf("answered %q", tag)
		}
		return err
	})
}
