// Command probe is a hostile agent for the adversarial suite: installed as
// both vendor binaries, it runs in the real jail and does what the test
// tells it (shell steps, reads of secrets, connects, setuid calls, filling
// scratch space, a fork loop, a nested launch, a listener on the login
// port, a flood of the egress proxy), and reports every result as one flat
// JSON object on stdout. It prints what it manages to read, and copies it
// into the workspace, so that a leak shows on the host. On the host, mode
// "ask" is a client of a loopback port, run as any user.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/jailtest/agentio"
)

// Step is one shell script, run by /bin/sh in the working directory.
type Step struct {
	Name   string `json:"name"`
	Script string `json:"sh"`
}

// Params come from the test as the argument after "probe".
type Params struct {
	// Mode "exit" returns at once with Code.
	Mode    string   `json:"mode"`
	Code    int      `json:"code"`
	Steps   []Step   `json:"steps"`
	Loot    []string `json:"loot"`    // files to read, print and copy into the workspace
	Connect []string `json:"connect"` // unix sockets to connect to
	Suid    string   `json:"suid"`    // a directory in which to try setuid and setgid bits
	Fill    []string `json:"fill"`    // directories to fill until a write fails
	FillMax int64    `json:"fill_max"`
	Fork    int      `json:"fork"`   // children to try to start
	Nested  string   `json:"nested"` // the shadow's path, to start again from inside
	// Listen are loopback addresses to listen on, each connection
	// answered with ListenAnswer; Ready is a file written once listening,
	// and the listening ends when the file Until appears (or after 6 s).
	Listen       []string `json:"listen"`
	ListenAnswer string   `json:"listen_answer"`
	Ready        string   `json:"ready"`
	Until        string   `json:"until"`
	// Flood sends CONNECTs to the egress proxy (HTTPS_PROXY): Count with a
	// target of Size bytes, then one for each of Targets.
	Flood *Flood `json:"flood"`
	// Addr is what mode "ask" connects to.
	Addr string `json:"addr"`
	// Keys is a key of the invoking session's keyring to reach.
	Keys *Keys `json:"keys"`
	// Swap is a second session's race against the next launch in the
	// same workspace.
	Swap *Swap `json:"swap"`
}

// Swap exchanges each of Paths with a link (renameat2 RENAME_EXCHANGE)
// and back, round after round, the links pointing at each of Targets in
// turn, after writing Ready, until the file Until appears (or after 100
// s). Every Every milliseconds it runs the step Rebuild (a repository made and
// removed again, so that the next launch sees it only at times).
type Swap struct {
	Paths   []string `json:"paths"`
	Targets []string `json:"targets"`
	Ready   string   `json:"ready"`
	Until   string   `json:"until"`
	Rebuild string   `json:"rebuild"`
	Every   int      `json:"every"`
}

// Flood is a burst of CONNECTs the proxy must refuse.
type Flood struct {
	Count   int      `json:"count"`
	Size    int      `json:"size"`
	Targets []string `json:"targets"`
}

var report = map[string]string{}

// res is a result for the report.
func res(err error) string { return agentio.Result(err) }

func main() {
	var p Params
	if err := agentio.Params(os.Args, &p); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(3)
	}
	if p.Mode == "exit" {
		os.Exit(p.Code)
	}
	if p.Mode == "ask" {
		report["ask"] = ask(p.Addr)
		b, _ := json.Marshal(report)
		os.Stdout.Write(append(b, '\n'))
		return
	}
	for _, s := range p.Steps {
		report["sh:"+s.Name] = shell(s.Script)
	}
	loot(p.Loot)
	for _, s := range p.Connect {
		c, err := net.DialTimeout("unix", s, 2*time.Second)
		if err == nil {
			c.Close()
		}
		report["connect:"+s] = res(err)
	}
	if p.Suid != "" {
		suid(p.Suid)
	}
	if p.Keys != nil {
		keys(p.Keys)
	}
	for _, d := range p.Fill {
		report["fill:"+d] = fill(d, p.FillMax)
	}
	if p.Fork > 0 {
		report["fork"] = forkLoop(p.Fork)
	}
	if len(p.Listen) > 0 {
		listen(p)
	}
	if p.Flood != nil {
		flood(p.Flood)
	}
	if p.Swap != nil {
		swap(p.Swap)
	}
	if p.Nested != "" {
		c := exec.Command(p.Nested, "probe", `{"mode":"exit","code":7}`)
		var e bytes.Buffer
		c.Stderr = &e
		err := c.Run()
		report["nested"] = res(err)
		if ee, ok := err.(*exec.ExitError); ok {
			report["nested"] = "exit " + strconv.Itoa(ee.ExitCode())
		}
		report["nested_stderr"] = e.String()
	}
	b, _ := json.Marshal(report)
	os.Stdout.Write(append(b, '\n'))
}

// shell runs a script and says how it ended, with its output.
func shell(script string) string {
	c := exec.Command("/bin/sh", "-c", script)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		return res(err)
	}
	t := time.AfterFunc(30*time.Second, func() { c.Process.Kill() })
	err := c.Wait()
	t.Stop()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		return res(err)
	}
	o := out.String()
	if len(o) > 2000 {
		o = o[:2000] + "..."
	}
	return fmt.Sprintf("exit %d: %s", code, o)
}

// loot reads each file, prints it, and copies it into the workspace: a
// secret the jail shows is then on stdout, on stderr and in the tree the
// user commits.
func loot(paths []string) {
	for i, p := range paths {
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			report["loot:"+p] = res(err)
			continue
		}
		b := make([]byte, 64<<10)
		n, err := f.Read(b)
		f.Close()
		if n == 0 {
			report["loot:"+p] = "empty " + res(err)
			continue
		}
		report["loot:"+p] = "read " + string(b[:n])
		fmt.Fprintf(os.Stderr, "probe: %s: %s\n", p, b[:n])
		os.WriteFile("loot-"+strconv.Itoa(i), b[:n], 0o644)
	}
}

// suid tries every call that could set S_ISUID or S_ISGID, each on a file
// of its own in dir; the host then looks at the files' modes.
func suid(dir string) {
	os.MkdirAll(dir, 0o755)
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte("#!/bin/sh\nid\n"), 0o755)
		return p
	}
	report["suid:chmod"] = res(unix.Chmod(mk("chmod"), 0o4755))
	if f, err := os.OpenFile(mk("fchmod"), os.O_RDONLY, 0); err == nil {
		report["suid:fchmod"] = res(unix.Fchmod(int(f.Fd()), 0o2755))
		f.Close()
	}
	report["suid:fchmodat"] = res(unix.Fchmodat(unix.AT_FDCWD, mk("fchmodat"), 0o6755, 0))
	p := mk("fchmodat2")
	b, _ := unix.BytePtrFromString(p)
	_, _, e := unix.Syscall6(unix.SYS_FCHMODAT2, atFDCWD, uintptr(unsafe.Pointer(b)), 0o4755, 0, 0, 0)
	report["suid:fchmodat2"] = errnoRes(e)
	fd, err := unix.Open(filepath.Join(dir, "open"), unix.O_CREAT|unix.O_WRONLY|unix.O_EXCL, 0o4755)
	report["suid:open"] = res(err)
	if err == nil {
		unix.Close(fd)
	}
	fd, err = unix.Openat(unix.AT_FDCWD, filepath.Join(dir, "openat"), unix.O_CREAT|unix.O_WRONLY|unix.O_EXCL, 0o2755)
	report["suid:openat"] = res(err)
	if err == nil {
		unix.Close(fd)
	}
	fd, err = unix.Openat2(unix.AT_FDCWD, filepath.Join(dir, "openat2"), &unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY | unix.O_EXCL, Mode: 0o6755})
	report["suid:openat2"] = res(err)
	if err == nil {
		unix.Close(fd)
	}
	fd, err = unix.Creat(filepath.Join(dir, "creat"), 0o4755)
	report["suid:creat"] = res(err)
	if err == nil {
		unix.Close(fd)
	}
	report["suid:mknod"] = res(unix.Mknod(filepath.Join(dir, "mknod"), unix.S_IFREG|0o6755, 0))
	d := filepath.Join(dir, "setgid-dir")
	os.Mkdir(d, 0o755)
	report["suid:chmod-dir"] = res(unix.Chmod(d, 0o2755))
	report["suid:mkdir"] = res(unix.Mkdir(filepath.Join(dir, "mkdir"), 0o2755))
}

func errnoRes(e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	return unix.ErrnoName(e)
}

// fill writes 1 MiB blocks into dir until a write fails or max bytes are
// written, then removes its file: "<bytes> <result>".
func fill(dir string, max int64) string {
	p := filepath.Join(dir, "cco-probe-fill")
	f, err := os.Create(p)
	if err != nil {
		return "0 " + res(err)
	}
	defer os.Remove(p)
	defer f.Close()
	block := bytes.Repeat([]byte("x"), 1<<20)
	var n int64
	for n < max {
		w, err := f.Write(block)
		n += int64(w)
		if err != nil {
			return fmt.Sprintf("%d %s", n, res(err))
		}
	}
	return fmt.Sprintf("%d ok", n)
}

// forkLoop starts sleeping children until a start fails or max run, then
// ends them all: "<started> <result>".
func forkLoop(max int) string {
	var pids []int
	defer func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
		}
	}()
	for len(pids) < max {
		pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "60"}, &syscall.ProcAttr{})
		if err != nil {
			return fmt.Sprintf("%d %s", len(pids), res(err))
		}
		pids = append(pids, pid)
	}
	return fmt.Sprintf("%d ok", len(pids))
}

// atFDCWD is AT_FDCWD as a raw system call argument.
var atFDCWD = func() uintptr { fd := unix.AT_FDCWD; return uintptr(fd) }()

// listen answers every connection to the addresses until the file Until
// appears, and reports how many came: "<n> connections" or the error.
func listen(p Params) {
	var lns []net.Listener
	counts := make([]int, len(p.Listen))
	var mu sync.Mutex
	for i, a := range p.Listen {
		l, err := net.Listen("tcp", a)
		if err != nil {
			report["listen:"+a] = res(err)
			continue
		}
		lns = append(lns, l)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				counts[i]++
				mu.Unlock()
				c.Write([]byte(p.ListenAnswer))
				c.Close()
			}
		}()
	}
	if p.Ready != "" {
		os.WriteFile(p.Ready, []byte("listening\n"), 0o644)
	}
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(p.Until); err == nil {
			break
		}
	}
	for _, l := range lns {
		l.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	for i, a := range p.Listen {
		if _, failed := report["listen:"+a]; !failed {
			report["listen:"+a] = fmt.Sprintf("%d connections", counts[i])
		}
	}
}

// flood sends the CONNECTs through the proxy the jail points at and
// reports each status line: "flood" for the sized ones (the distinct
// answers), "flood:<i>" for each of Targets.
func flood(f *Flood) {
	proxy := strings.TrimPrefix(os.Getenv("HTTPS_PROXY"), "http://")
	connect := func(target string) string {
		c, err := net.DialTimeout("tcp", proxy, 2*time.Second)
		if err != nil {
			return res(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		go fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", target)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return res(err)
		}
		return strings.TrimSpace(line)
	}
	seen := map[string]int{}
	huge := strings.Repeat("a", f.Size) + ".example:443"
	for range f.Count {
		seen[connect(huge)]++
	}
	report["flood"] = fmt.Sprint(seen)
	for i, t := range f.Targets {
		report["flood:"+strconv.Itoa(i)] = connect(t)
	}
}

// ask reads what a loopback server answers: "answer <text>", "closed"
// (nothing before the end), or the error.
func ask(addr string) string {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return res(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(c)
	if len(b) == 0 {
		if err != nil {
			return res(err)
		}
		return "closed"
	}
	return "answer " + string(b)
}

// swap runs a Swap and reports, for each path, how many exchanges were
// made and the last error.
func swap(sw *Swap) {
	made := map[string]int{}
	last := map[string]string{}
	os.WriteFile(sw.Ready, []byte("ready\n"), 0o644)
	deadline := time.Now().Add(100 * time.Second)
	var rebuilt time.Time
	round := 0
	for ; time.Now().Before(deadline); round++ {
		if _, err := os.Stat(sw.Until); err == nil {
			break
		}
		if sw.Rebuild != "" && time.Since(rebuilt) > time.Duration(sw.Every)*time.Millisecond {
			report["rebuild"] = shell(sw.Rebuild)
			rebuilt = time.Now()
		}
		if len(sw.Paths) == 0 {
			time.Sleep(10 * time.Millisecond) // only waiting for Until
		}
		for i, p := range sw.Paths {
			link := p + ".cco-swap"
			os.Remove(link)
			if err := os.Symlink(sw.Targets[(round+i)%len(sw.Targets)], link); err != nil {
				last[p] = err.Error()
				continue
			}
			if err := unix.Renameat2(unix.AT_FDCWD, p, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
				last[p] = err.Error()
				os.Remove(link)
				continue
			}
			made[p]++
			// The link stands in p's place for a moment, then p comes back.
			runtime.Gosched()
			if err := unix.Renameat2(unix.AT_FDCWD, p, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
				last[p] = "back: " + err.Error()
			}
			os.Remove(link)
		}
	}
	for _, p := range sw.Paths {
		report["swap:"+p] = strconv.Itoa(made[p]) + " " + last[p]
	}
	report["rounds"] = strconv.Itoa(round)
}
