package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAbsoluteForm(t *testing.T) {
	var seen *http.Request
	up := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Clone(r.Context())
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s body=%q", r.Method, r.Host, r.URL.RequestURI(), body)
	}))
	port := portOf(t, up)
	f := newFixture(t, Policy{Ports: []int{port}, AllowHost: []string{"web.test"}}, map[string]string{"web.test": "127.0.0.1"},
		func(f *fixture) { f.dial.allowed[up] = true })
	c := proxyClient(f.sock)
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://web.test:%d/p/a?q=1", port), strings.NewReader("payload"))
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "1")
	req.Header.Set("X-Kept", "2")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf(`POST web.test:%d /p/a?q=1 body="payload"`, port)
	if resp.StatusCode != 200 || string(body) != want {
		t.Fatalf("%d %q, want 200 %q", resp.StatusCode, body, want)
	}
	if seen.Header.Get("Proxy-Authorization") != "" || seen.Header.Get("X-Hop") != "" || seen.Header.Get("X-Kept") != "2" {
		t.Errorf("upstream headers %v", seen.Header)
	}
	// Only plain http travels in absolute form; https goes through CONNECT.
	raw := rawExchange(t, f.sock, "GET https://web.test:443/ HTTP/1.1\r\nHost: web.test\r\n\r\n")
	if !strings.HasPrefix(raw, "HTTP/1.1 400") || !strings.Contains(raw, "not a proxy request") {
		t.Errorf("absolute https:// answered %q", raw)
	}
}

// One client connection, several requests: each is checked and dialled on
// its own, so an allowed first request does not carry a denied second one.
func TestAbsoluteFormKeepAliveChecksEachRequest(t *testing.T) {
	up := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok:"+r.URL.Path) }))
	port := portOf(t, up)
	f := newFixture(t, Policy{Ports: []int{port}, AllowHost: []string{"web.test"}},
		map[string]string{"web.test": "127.0.0.1", "lan.test": "192.168.1.10"},
		func(f *fixture) { f.dial.allowed[up] = true })
	conn, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	get := func(host, path string) *http.Response {
		fmt.Fprintf(conn, "GET http://%s:%d%s HTTP/1.1\r\nHost: %s\r\n\r\n", host, port, path, host)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s%s: %v", host, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Header.Set("X-Body", string(b))
		return resp
	}
	for _, p := range []string{"/one", "/two"} {
		if r := get("web.test", p); r.StatusCode != 200 || r.Header.Get("X-Body") != "ok:"+p {
			t.Fatalf("%s: %d %q", p, r.StatusCode, r.Header.Get("X-Body"))
		}
	}
	r := get("lan.test", "/three")
	wantRefused(t, r, nil, http.StatusForbidden, "192.168.1.10, which is private")
	if d := f.dial.dialed(); len(d) != 2 {
		t.Errorf("dials %v, want a fresh one per allowed request", d)
	}
}

func TestAbsoluteFormChunked(t *testing.T) {
	up := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 3; i++ {
			fmt.Fprintf(w, "part%d;", i)
			w.(http.Flusher).Flush()
		}
	}))
	port := portOf(t, up)
	f := newFixture(t, Policy{Ports: []int{port}, AllowHost: []string{"web.test"}}, map[string]string{"web.test": "127.0.0.1"},
		func(f *fixture) { f.dial.allowed[up] = true })
	resp, err := proxyClient(f.sock).Get(fmt.Sprintf("http://web.test:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "part0;part1;part2;" {
		t.Errorf("body %q", b)
	}
}

func rawExchange(t *testing.T, sock, req string) string {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, req)
	b, _ := io.ReadAll(c)
	return string(b)
}

func TestAbsoluteFormExpectContinue(t *testing.T) {
	up := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %q expect=%q", b, r.Header.Get("Expect"))
	}))
	port := portOf(t, up)
	f := newFixture(t, Policy{Ports: []int{port}, AllowHost: []string{"web.test"}}, map[string]string{"web.test": "127.0.0.1"},
		func(f *fixture) { f.dial.allowed[up] = true })
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST http://web.test:%d/ HTTP/1.1\r\nHost: web.test\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n", port)
	br := bufio.NewReader(c)
	// The body goes only after the 100: a proxy that waits for it first
	// never answers, and the deadline fails the test.
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("want 100 Continue first: %v %v", resp, err)
	}
	io.WriteString(c, "abc")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != `got "abc" expect=""` {
		t.Errorf("%d %q", resp.StatusCode, b)
	}
}
