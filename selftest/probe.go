package selftest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Paths the probe reads inside the jail; tests point them elsewhere.
var (
	markerPath = "/run/cco/jail"
	statusPath = "/proc/self/status"
)

// Probe runs the battery from inside the jail and returns what it saw.
func Probe(req *Request) *Report {
	r := &Report{Schema: Schema, Nonce: req.Nonce, Engine: "bubblewrap", Kernel: kernel()}
	r.Engine, r.Layers = engineAndLayers()
	add := func(c Check) { r.Checks = append(r.Checks, c) }
	for _, id := range sortedKeys(req.Secrets) {
		add(secret(id, req.Secrets[id], req.Nonce))
	}
	for _, id := range sortedKeys(req.HiddenDirs) {
		add(hiddenDir(id, req.HiddenDirs[id]))
	}
	add(writable(req.Workspace, req.Nonce))
	add(readOnly(req.ReadOnly, req.Nonce))
	status, err := os.ReadFile(statusPath)
	if err != nil {
		status = nil
	}
	add(capabilities(status))
	add(statusIs(status, "no_new_privs", "NoNewPrivs", "1", "no_new_privs is set"))
	add(statusIs(status, "seccomp", "Seccomp", "2", "a seccomp filter is in force"))
	add(ttyInjection())
	add(ttyLinux())
	add(userNamespace())
	add(unixSocket("socket.path", req.UnixSocket, false))
	add(unixSocket("socket.abstract", req.Abstract, true))
	add(egressRefused(req.Refused))
	if req.Allowed != "" {
		add(egressAllowed(req.Allowed))
	}
	if req.GateScript != "" {
		add(guardInside(req.Agent, req.GateScript))
	}
	return r
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func kernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// engineAndLayers reads what the marker says builds the jail. A marker
// without the fields is bubblewrap's, with namespaces and seccomp.
func engineAndLayers() (string, []string) {
	engine, layers := "bubblewrap", []string{"namespaces", "seccomp"}
	b, err := os.ReadFile(markerPath)
	if err != nil {
		return engine, layers
	}
	var m struct {
		Engine string   `json:"engine"`
		Layers []string `json:"layers"`
	}
	if json.Unmarshal(b, &m) == nil {
		if m.Engine != "" {
			engine = m.Engine
		}
		if len(m.Layers) > 0 {
			layers = m.Layers
		}
	}
	return engine, layers
}

// secret: the sentinel file must not be readable, nor its content seen.
func secret(id, path, nonce string) Check {
	c := Check{ID: id}
	b, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Contains(b, []byte(nonce)):
		c.Detail = fmt.Sprintf("%s is readable in the jail and holds the sentinel", path)
	case err == nil:
		c.OK, c.Detail = true, fmt.Sprintf("%s reads, but not as the host's file (a mask)", path)
	default:
		c.OK, c.Detail = true, fmt.Sprintf("%s: %s", path, errText(err))
	}
	return c
}

func hiddenDir(id, dir string) Check {
	c := Check{ID: id}
	ents, err := os.ReadDir(dir)
	if err != nil {
		c.OK, c.Detail = true, fmt.Sprintf("%s: %s", dir, errText(err))
		return c
	}
	if len(ents) > 0 {
		c.Detail = fmt.Sprintf("%s lists %d entries in the jail (%s, ...)", dir, len(ents), ents[0].Name())
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("%s is empty in the jail", dir)
	return c
}

func writable(ws, nonce string) Check {
	c := Check{ID: "write.workspace"}
	p := filepath.Join(ws, ".cco-verify-"+nonce)
	if err := os.WriteFile(p, []byte(nonce), 0o600); err != nil {
		c.Detail = fmt.Sprintf("the workspace %s is not writable in the jail: %s", ws, errText(err))
		return c
	}
	os.Remove(p)
	c.OK, c.Detail = true, ws+" is writable"
	return c
}

func readOnly(dirs []string, nonce string) Check {
	c := Check{ID: "write.outside"}
	var wrote []string
	for _, d := range dirs {
		p := filepath.Join(d, ".cco-verify-"+nonce)
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			f.Close()
			os.Remove(p)
			wrote = append(wrote, d)
		}
	}
	if len(wrote) > 0 {
		c.Detail = "writable in the jail: " + strings.Join(wrote, ", ")
		return c
	}
	c.OK, c.Detail = true, fmt.Sprintf("none of %d directories outside the workspace, the login state and the caches is writable", len(dirs))
	return c
}

func statusField(status []byte, key string) string {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func capabilities(status []byte) Check {
	c := Check{ID: "capabilities"}
	var held []string
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		v := statusField(status, k)
		if v == "" || strings.Trim(v, "0") != "" {
			held = append(held, k+"="+v)
		}
	}
	if len(held) > 0 {
		c.Detail = "the jail's process holds capabilities: " + strings.Join(held, " ")
		return c
	}
	c.OK, c.Detail = true, "no capabilities (CapInh, CapPrm, CapEff, CapBnd and CapAmb all 0)"
	return c
}

func statusIs(status []byte, id, key, want, ok string) Check {
	v := statusField(status, key)
	if v == want {
		return Check{ID: id, OK: true, Detail: ok + " (" + key + ": " + v + ")"}
	}
	return Check{ID: id, Detail: fmt.Sprintf("%s is %q in the jail, not %s", key, v, want)}
}

// openPty opens a pty pair of the jail's own devpts.
func openPty() (master, slave int, err error) {
	master, err = unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, -1, err
	}
	if err = unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(master)
		return -1, -1, err
	}
	slave, err = unix.IoctlRetInt(master, unix.TIOCGPTPEER)
	if err != nil {
		unix.Close(master)
		return -1, -1, err
	}
	return master, slave, nil
}

// ttyInjection: TIOCSTI, which would type into a terminal, is refused by
// the filter (EPERM), whatever the kernel's own legacy_tiocsti says.
func ttyInjection() Check {
	b := byte('x')
	return ttyRefused("tiocsti", "TIOCSTI", unix.TIOCSTI, &b)
}

func ttyLinux() Check {
	sub := byte(6) // TIOCL_GETSHIFTSTATE: harmless where it is allowed
	return ttyRefused("tioclinux", "TIOCLINUX", unix.TIOCLINUX, &sub)
}

// ttyRefused tries the ioctl req on a pty of the jail's own: only the
// filter's EPERM counts as refused.
func ttyRefused(id, name string, req uint, arg *byte) Check {
	c := Check{ID: id}
	m, s, err := openPty()
	if err != nil {
		c.Detail = "no pty to try " + name + " on: " + errText(err)
		return c
	}
	defer unix.Close(m)
	defer unix.Close(s)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s), uintptr(req), uintptr(unsafe.Pointer(arg)))
	if errno == unix.EPERM {
		c.OK, c.Detail = true, name+" refused (EPERM)"
		return c
	}
	c.Detail = fmt.Sprintf("%s was not refused by the filter (%v)", name, errnoText(errno))
	return c
}

// userNamespace: a process in the jail cannot make a user namespace, in
// which it would hold capabilities again.
func userNamespace() Check {
	c := Check{ID: "userns"}
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{
		Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}})
	if err != nil {
		c.OK, c.Detail = true, "a new user namespace is refused: "+errText(err)
		return c
	}
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, 0, nil)
	c.Detail = "a process in the jail created a user namespace"
	return c
}

func unixSocket(id, addr string, abstract bool) Check {
	c := Check{ID: id}
	if addr == "" {
		c.Detail = "the verifier made no listener"
		return c
	}
	name := addr
	if abstract {
		name = "@" + addr
	}
	conn, err := net.DialTimeout("unix", name, 2*time.Second)
	if err != nil {
		c.OK, c.Detail = true, fmt.Sprintf("the host's listener %s is out of reach: %s", name, errText(err))
		return c
	}
	conn.Close()
	c.Detail = fmt.Sprintf("connected to the host's listener %s", name)
	return c
}

// proxyURL is the egress proxy the jail's environment names, if any.
func proxyURL() *url.URL {
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		if v := os.Getenv(k); v != "" {
			if u, err := url.Parse(v); err == nil && u.Host != "" {
				return u
			}
		}
	}
	return nil
}

// connect asks the jail's way out for target: through the egress proxy
// (CONNECT) when the jail names one, else directly.
func connect(target string) (status int, how string, err error) {
	u := proxyURL()
	if u == nil {
		conn, err := net.DialTimeout("tcp", target, 2*time.Second)
		if err != nil {
			return 0, "direct", err
		}
		conn.Close()
		return 200, "direct", nil
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		return 0, "the proxy " + u.Host, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	// The status line and the headers, read by hand: the helper links no
	// HTTP stack (every launch would pay for its init).
	br := bufio.NewReader(io.LimitReader(conn, 64<<10))
	line, err := br.ReadString('\n')
	if err != nil {
		return 0, "the proxy " + u.Host, err
	}
	var proto string
	if _, err := fmt.Sscanf(line, "%s %d", &proto, &status); err != nil {
		return 0, "the proxy " + u.Host, fmt.Errorf("not an HTTP answer: %q", strings.TrimSpace(line))
	}
	why := ""
	for {
		h, err := br.ReadString('\n')
		if err != nil || strings.TrimSpace(h) == "" {
			break
		}
		if k, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "X-Cco-Egress-Reason") {
			why = strings.TrimSpace(v)
		}
	}
	if why != "" {
		return status, "the proxy " + u.Host + " (" + why + ")", nil
	}
	return status, "the proxy " + u.Host, nil
}

func egressRefused(target string) Check {
	c := Check{ID: "egress.refused"}
	if target == "" {
		c.Detail = "the verifier made no sink"
		return c
	}
	code, how, err := connect(target)
	switch {
	case err != nil:
		c.OK, c.Detail = true, fmt.Sprintf("%s refused through %s: %s", target, how, errText(err))
	case code != 200:
		c.OK, c.Detail = true, fmt.Sprintf("%s refused by %s: %d", target, how, code)
	default:
		c.Detail = fmt.Sprintf("%s was reached through %s", target, how)
	}
	return c
}

func egressAllowed(target string) Check {
	c := Check{ID: "egress.allowed"}
	code, how, err := connect(target)
	if err == nil && code == 200 {
		c.OK, c.Detail = true, fmt.Sprintf("%s reached through %s", target, how)
		return c
	}
	if err != nil {
		c.Detail = fmt.Sprintf("%s not reached through %s: %s", target, how, errText(err))
	} else {
		c.Detail = fmt.Sprintf("%s refused by %s: %d", target, how, code)
	}
	return c
}

// guardInside runs the prompt gate as the agent's hook would: inside the
// jail it must let the prompt through.
func guardInside(agent, gateScript string) Check {
	c := Check{ID: "guard.inside"}
	cmd := exec.Command("/bin/sh", gateScript, agent)
	cmd.Stdin = strings.NewReader(`{"session_id":"cco-verify","hook_event_name":"UserPromptSubmit","cwd":"/","prompt":"cco verify"}`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		c.OK, c.Detail = true, gateScript+" lets a prompt through inside the jail"
		return c
	}
	c.Detail = fmt.Sprintf("%s blocks inside the jail (%s): %s", gateScript, errText(err), strings.TrimSpace(firstLine(stderr.String())))
	return c
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	return err.Error()
}

func errnoText(e syscall.Errno) string {
	if e == 0 {
		return "it succeeded"
	}
	return e.Error()
}
