package attack

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/jailtest"
)

// loginAddrs are the host addresses a jail's login listener could get:
// codex's two ports, listened on by every profile's probe.
var loginAddrs = []string{"127.0.0.1:1455", "127.0.0.1:1457"}

// askAs runs the probe on the host, unwrapped, as uid, to read what addr
// answers.
func askAs(r *jailtest.Root, uid int, addr string) string {
	c := exec.Command(r.Agent, "probe", probe{Mode: "ask", Addr: addr}.arg())
	if uid != 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	out, err := c.Output()
	var rep map[string]string
	if json.Unmarshal(out, &rep) != nil {
		return fmt.Sprintf("no report (%v): %s", err, out)
	}
	return rep["ask"]
}

// otherUsers are two users that are not u: another user, and root when u
// is not root.
func otherUsers(u jailtest.RunAs) []int {
	if u.UID == 0 {
		return []int{65534, 65533}
	}
	return []int{0, 65533}
}

// loginPort is the class of a listener on the login ports: in a session
// that runs no login, the host never reaches it; during a login, the
// invoking user's browser does and no other user's, root's included.
func loginPort(login bool) attack {
	name := "listen on the login ports in a session that runs no login"
	if login {
		name = "listen on the login ports during a first login"
	}
	answer := "probe-login-" + tag
	return attack{
		name:   name,
		serial: true, // the host's ports are one for every jail
		only: func(a string, _ jailtest.RunAs) bool {
			p, _ := agent.Lookup(a)
			return !login || len(p.LoginPorts) > 0
		},
		prep: func(t *testing.T, w *world) {
			if login {
				for _, p := range agent.All() {
					if p.LoginState != "" {
						os.Remove(filepath.Join(w.Home, p.LoginState)) // a first run
					}
				}
			}
			r := shared.Get(t)
			ready, until := filepath.Join(w.ws, "login-ready"), filepath.Join(w.ws, "login-done")
			w.during, w.ended = make(chan map[string]string, 1), make(chan struct{})
			go func() {
				seen := map[string]string{}
				defer func() {
					os.WriteFile(until, nil, 0o644)
					w.during <- seen
				}()
				for {
					if _, err := os.Stat(ready); err == nil {
						break
					}
					select {
					case <-w.ended:
						seen["ready"] = "the probe never listened"
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
				// The shadow reads the jail's listeners every 200 ms.
				time.Sleep(500 * time.Millisecond)
				for _, a := range loginAddrs {
					k := fmt.Sprintf("%s as uid %d", a, w.U.UID)
					seen[k] = askAs(r, w.U.UID, a)
					for end := time.Now().Add(2 * time.Second); login && !strings.HasPrefix(seen[k], "answer") && time.Now().Before(end); {
						time.Sleep(100 * time.Millisecond)
						seen[k] = askAs(r, w.U.UID, a)
					}
					for _, uid := range otherUsers(w.U) {
						seen[fmt.Sprintf("%s as uid %d", a, uid)] = askAs(r, uid, a)
					}
				}
			}()
		},
		probe: func(w *world, _ string) probe {
			return probe{Listen: loginAddrs, ListenAnswer: answer, Ready: filepath.Join(w.ws, "login-ready"), Until: filepath.Join(w.ws, "login-done")}
		},
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			close(w.ended)
			started(t, sess)
			seen := <-w.during
			t.Logf("the host saw %v; the probe %q", seen, sess.Report)
			if why, ok := seen["ready"]; ok {
				t.Fatal(why)
			}
			for k, got := range seen {
				invoker := strings.HasSuffix(k, fmt.Sprintf(" as uid %d", w.U.UID))
				switch {
				case login && invoker:
					if got != "answer "+answer {
						t.Errorf("during the login, the invoking user's %s: %q, want the jail's answer", k, got)
					}
				case strings.Contains(got, answer):
					t.Errorf("LEAK: %s reached the jail's listener: %q", k, got)
				}
			}
			want := "0 connections"
			if login {
				want = "1 connections"
			}
			for _, a := range loginAddrs {
				if got := sess.Report["listen:"+a]; got != want {
					t.Errorf("the jail's listener on %s: %s, want %s", a, got, want)
				}
			}
			if login && !strings.Contains(sess.Stderr, "refused a connection to the login callback") {
				t.Errorf("the other users' connections went unsaid: %s", sess.Stderr)
			}
		},
	}
}

// TestLoginPort: the login port is the invoking user's alone, and only
// during a login.
func TestLoginPort(t *testing.T) {
	runAttacks(t, []attack{loginPort(false), loginPort(true)})
}

// TestEgressAuditFlood: a session that floods the proxy with huge and
// hostile targets does not rotate the audit log's earlier records away,
// and its end says what it was refused, in one printable line. The
// refused address is loopback's: the real proxy runs here with no injected
// dialer, so even a proxy that wrongly let it through would send nothing
// off this machine.
func TestEgressAuditFlood(t *testing.T) {
	hostile := "\u009b31m\u202eevil.example:443"
	earlier := fmt.Sprintf(`{"time":"2026-01-01T00:00:00Z","session":"earlier-%s","method":"CONNECT","target":"api.example.com:443","allowed":true,"up":1,"down":1}`, tag)
	logOf := func(w *world) string { return filepath.Join(w.Home, ".local/state/cco/egress.log") }
	runAttacks(t, []attack{{
		name: "22 CONNECTs with 1 MB targets, and targets a terminal would act on",
		prep: func(t *testing.T, w *world) {
			p := logOf(w)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(earlier+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			w.Own(t)
		},
		probe: func(w *world, _ string) probe {
			return probe{Flood: &flood{Count: 22, Size: 1000000, Targets: []string{"127.0.0.1:443", hostile}}}
		},
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			started(t, sess)
			if got := sess.Report["flood"]; got != "map[HTTP/1.1 400 Bad Request:22]" {
				t.Errorf("the 1 MB targets: %s, want 22 refusals (400)", got)
			}
			for i := range 2 {
				if got := sess.Report["flood:"+strconv.Itoa(i)]; got != "HTTP/1.1 403 Forbidden" {
					t.Errorf("target %d: %s, want 403", i, got)
				}
			}
			p := logOf(w)
			if _, err := os.Stat(p + ".1"); err == nil {
				t.Errorf("the flood rotated %s", p)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 4<<20)
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			if len(lines) != 25 || lines[0] != earlier {
				t.Errorf("%s holds %d records, the first %.120q: want the earlier record first, then the session's 24", p, len(lines), lines[0])
			}
			for _, l := range lines {
				if len(l) > 2048 {
					t.Errorf("a record of %d bytes", len(l))
				}
			}
			var summary []string
			for _, l := range strings.Split(sess.Stderr, "\n") {
				if strings.HasPrefix(l, "cco: egress this session:") {
					summary = append(summary, l)
				}
			}
			if len(summary) != 1 {
				t.Fatalf("summary lines %q in stderr %s, want one", summary, sess.Stderr)
			}
			s := summary[0]
			for _, want := range []string{"allowed 0", "refused 24 to 3", "127.0.0.1:443", `\u009b31m\u202eevil.example:443`, p} {
				if !strings.Contains(s, want) {
					t.Errorf("the summary %q does not say %q", s, want)
				}
			}
			if !utf8.ValidString(s) {
				t.Errorf("the summary is not UTF-8: %q", s)
			}
			for _, r := range s {
				if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
					t.Errorf("the summary holds %U: %q", r, s)
				}
			}
		},
	}})
}
