package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAuditConnectEntries(t *testing.T) {
	f := newFixture(t, Policy{AllowHost: []string{"up.test"}}, map[string]string{"up.test": "127.0.0.1", "lan.test": "10.9.9.9"})
	_, c := f.connect(t, "up.test")
	if c == nil {
		t.Fatal("CONNECT up.test refused")
	}
	msg := strings.Repeat("0123456789", 5000)
	go func() {
		io.WriteString(c, msg)
		c.(*net.UnixConn).CloseWrite()
	}()
	back, err := io.ReadAll(c)
	if err != nil || string(back) != msg {
		t.Fatalf("echo: %d bytes, %v", len(back), err)
	}
	resp, c2 := f.connect(t, "lan.test")
	wantRefused(t, resp, c2, http.StatusForbidden, "private")
	f.p.Close() // waits for the handlers, so every entry is written
	es, err := ReadAudit(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 {
		t.Fatalf("%d entries: %+v", len(es), es)
	}
	// The tunnel's entry is written when its handler finishes, which may be
	// after the refusal that followed it.
	ok, no := es[0], es[1]
	if !ok.Allowed {
		ok, no = no, ok
	}
	target := fmt.Sprintf("up.test:%d", f.port4)
	if !ok.Allowed || ok.Method != "CONNECT" || ok.Target != target || ok.Addr != f.up4 || ok.Session != "s1" ||
		ok.Up != int64(len(msg)) || ok.Down != int64(len(msg)) || ok.Time.IsZero() || ok.Duration <= 0 {
		t.Errorf("allowed entry %+v", ok)
	}
	if no.Allowed || no.Target != fmt.Sprintf("lan.test:%d", f.port4) || !strings.Contains(no.Reason, "10.9.9.9, which is private") || no.Up != 0 || no.Down != 0 {
		t.Errorf("denied entry %+v", no)
	}
}

// An absolute-form exchange is counted in wire bytes each way.
func TestAuditAbsoluteFormBytes(t *testing.T) {
	const answer = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		cr := &countConn{Conn: c}
		req, err := http.ReadRequest(bufio.NewReader(cr))
		if err != nil {
			got <- -1
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, answer)
		got <- cr.read
	}()
	up := l.Addr().String()
	port := portOf(t, up)
	f := newFixture(t, Policy{Ports: []int{port}, AllowHost: []string{"web.test"}}, map[string]string{"web.test": "127.0.0.1"},
		func(f *fixture) { f.dial.allowed[up] = true })
	raw := rawExchange(t, f.sock, fmt.Sprintf("PUT http://web.test:%d/x HTTP/1.1\r\nHost: web.test\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody", port))
	if !strings.HasSuffix(raw, "hello") {
		t.Fatalf("response %q", raw)
	}
	upBytes := <-got
	f.p.Close()
	es, err := ReadAudit(f.audit)
	if err != nil || len(es) != 1 {
		t.Fatalf("%v %+v", err, es)
	}
	if e := es[0]; !e.Allowed || e.Method != "PUT" || e.Up != upBytes || e.Down != int64(len(answer)) {
		t.Errorf("entry %+v, want up %d down %d", e, upBytes, len(answer))
	}
}

func TestAuditRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "cco", "egress.log")
	a, err := OpenAuditLog(path, "rot")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.MaxBytes, a.Keep = 2000, 2
	const n = 100
	for i := 0; i < n; i++ {
		if err := a.Record(Entry{Method: "CONNECT", Target: "h" + strconv.Itoa(i) + ".test:443", Allowed: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Errorf("%s.3 exists (Keep is 2): %v", path, err)
	}
	var seq []int
	for _, p := range []string{path + ".2", path + ".1", path} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > a.MaxBytes {
			t.Errorf("%s is %d bytes, over MaxBytes %d", p, fi.Size(), a.MaxBytes)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", p, fi.Mode())
		}
		es, err := ReadAudit(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Session != "rot" {
				t.Errorf("session %q", e.Session)
			}
			k, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(e.Target, "h"), ".test:443"))
			seq = append(seq, k)
		}
	}
	// The kept files hold the newest entries, oldest first, without a gap.
	for i := range seq {
		if seq[i] != n-len(seq)+i {
			t.Fatalf("kept entries %v are not the newest in order", seq)
		}
	}
	if len(seq) < 10 {
		t.Errorf("only %d entries kept", len(seq))
	}
	if fi, _ := os.Stat(filepath.Dir(path)); fi.Mode().Perm() != 0o700 {
		t.Errorf("log directory mode %v", fi.Mode())
	}
}

// Sessions running at once share the file; rotation by one loses no line
// of another.
func TestAuditConcurrentSessions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "egress.log")
	var logs []*AuditLog
	for i := 0; i < 3; i++ {
		a, err := OpenAuditLog(path, "s"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		a.MaxBytes, a.Keep = 4096, 1000
		defer a.Close()
		logs = append(logs, a)
	}
	const per = 150
	var wg sync.WaitGroup
	for _, a := range logs {
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < per; i++ {
					if err := a.Record(Entry{Method: "CONNECT", Target: "x.test:443", Up: int64(i)}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	files, _ := filepath.Glob(path + "*")
	total := 0
	for _, p := range files {
		if strings.HasSuffix(p, ".lock") {
			continue
		}
		es, err := ReadAudit(p)
		if err != nil {
			t.Fatal(err) // a torn line would show here
		}
		total += len(es)
	}
	if want := len(logs) * 2 * per; total != want {
		t.Errorf("%d entries across %d files, want %d", total, len(files), want)
	}
	if len(files) < 3 {
		t.Errorf("no rotation happened: %v", files)
	}
}

func TestAuditOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenAuditLog("rel/egress.log", "s"); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("relative path: %v", err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := OpenAuditLog(filepath.Join(file, "egress.log"), "s"); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("parent is a file: %v", err)
	}
	link := filepath.Join(dir, "egress.log")
	os.Symlink(filepath.Join(dir, "elsewhere"), link)
	if _, err := OpenAuditLog(link, "s"); err == nil || !strings.Contains(err.Error(), link) {
		t.Errorf("symlinked log: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "elsewhere")); !os.IsNotExist(err) {
		t.Error("opening followed the symlink")
	}
	a, err := OpenAuditLog(filepath.Join(dir, "ok.log"), "s")
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if err := a.Record(Entry{Time: time.Now()}); err == nil {
		t.Error("Record after Close succeeded")
	}
}

// TestAuditKeepsEvidence: a flood of refused requests with huge targets
// (22 CONNECTs of 1 MB once rotated every earlier record away) is refused
// before any lookup, each record holds at most a few hundred bytes of what
// the client chose, and the record made before the flood stays in the log
// itself.
func TestAuditKeepsEvidence(t *testing.T) {
	f := newFixture(t, Policy{AllowHost: []string{"up.test"}}, map[string]string{"up.test": "127.0.0.1"})
	_, c := f.connect(t, "up.test")
	if c == nil {
		t.Fatal("CONNECT up.test refused")
	}
	echoOnce(t, c, "before the flood")
	c.Close()
	huge := strings.Repeat("a", 1000000) // "1 MB", within the 1 MiB head
	flood := "CONNECT " + huge + ".test:" + strconv.Itoa(f.port4) + " HTTP/1.1\r\nHost: x\r\n\r\n"
	for i := 0; i < 22; i++ {
		conn, err := net.Dial("unix", f.sock)
		if err != nil {
			t.Fatal(err)
		}
		go io.WriteString(conn, flood)
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
		conn.Close()
		if err != nil || resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Header.Get(ReasonHeader), "more than 300") {
			t.Fatalf("a 1 MB target: %v %v", resp, err)
		}
	}
	// An absolute-form request, and a method as long as a head allows.
	for _, req := range []string{
		"GET http://" + huge[:500<<10] + ".test/ HTTP/1.1\r\nHost: x\r\n\r\n",
		strings.Repeat("G", 500<<10) + " http://up.test:" + strconv.Itoa(f.port4) + "/ HTTP/1.1\r\nHost: up.test\r\n\r\n",
	} {
		conn, err := net.Dial("unix", f.sock)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, req)
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.ReadAll(conn)
		conn.Close()
	}
	f.p.Close()
	if n := f.res.count(huge + ".test"); n != 0 {
		t.Errorf("an oversized target was resolved %d times", n)
	}
	if _, err := os.Stat(f.audit + ".1"); err == nil {
		t.Errorf("the flood rotated the log")
	}
	es, err := ReadAudit(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) < 23 || !es[0].Allowed || es[0].Target != fmt.Sprintf("up.test:%d", f.port4) {
		t.Fatalf("%d entries, first %+v: want the tunnel from before the flood first", len(es), es[0])
	}
	for _, e := range es {
		if len(e.Target) > MaxTarget || len(e.Method) > maxMethod || len(e.Reason) > maxReason {
			t.Errorf("an entry keeps %d bytes of target, %d of method, %d of reason", len(e.Target), len(e.Method), len(e.Reason))
		}
	}
	last, n := es[22], strconv.Itoa(len(huge+".test:")+len(strconv.Itoa(f.port4)))
	if last.Allowed || !strings.HasSuffix(last.Target, "aaa... ("+n+" bytes)") || !strings.Contains(last.Reason, n+" bytes long") {
		t.Errorf("a refused flood entry: %+v", last)
	}
	if fi, _ := os.Stat(f.audit); fi.Size() > 32<<10 {
		t.Errorf("the log grew to %d bytes", fi.Size())
	}
	if s := f.p.Tally.Summary(); s.Allowed.Requests < 1 || s.Refused.Requests < 23 {
		t.Errorf("tally %+v", s)
	}
}

// TestAuditRefusalsBounded: past MaxRefusalRecords, a session's refusals
// are counted, not logged one by one, and said in one record at the end;
// what is allowed is logged whatever the count.
func TestAuditRefusalsBounded(t *testing.T) {
	defer func(n int) { MaxRefusalRecords = n }(MaxRefusalRecords)
	MaxRefusalRecords = 5
	f := newFixture(t, Policy{AllowHost: []string{"up.test"}}, map[string]string{"up.test": "127.0.0.1"})
	for i := 0; i < 12; i++ {
		resp, c := tunnel(t, "unix", f.sock, "10.0.0."+strconv.Itoa(i)+":"+strconv.Itoa(f.port4))
		wantRefused(t, resp, c, http.StatusForbidden, "private")
	}
	_, c := f.connect(t, "up.test")
	if c == nil {
		t.Fatal("CONNECT up.test refused")
	}
	echoOnce(t, c, "after the refusals")
	c.Close()
	f.p.Close()
	f.p.Close() // said once
	es, err := ReadAudit(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	var refused, allowed, said int
	for _, e := range es {
		switch {
		case e.Allowed:
			allowed++
		case e.Method == "-":
			said++
			if !strings.Contains(e.Reason, "7 more refusals") {
				t.Errorf("the closing record: %+v", e)
			}
		default:
			refused++
		}
	}
	if refused != 5 || allowed != 1 || said != 1 {
		t.Errorf("%d refusals, %d allowed, %d closing records logged; want 5, 1, 1", refused, allowed, said)
	}
	if s := f.p.Tally.Summary(); s.Refused.Requests != 12 {
		t.Errorf("the summary counts %d refusals, want 12", s.Refused.Requests)
	}
}
