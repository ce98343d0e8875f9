// Command fakeagent stands in for a vendor binary in the jail tests: it
// reports, as JSON on stdout, what it can read, write and see from inside.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Params come from the test through the agent's arguments.
type Params struct {
	Mode    string   `json:"mode"` // probe, sleep, exit, rename
	Code    int      `json:"code"`
	Root    string   `json:"root"`
	HostPID int      `json:"host_pid"`
	Outside string   `json:"outside"` // a host file outside the workspace
	Socks   []string `json:"socks"`   // host unix sockets outside the workspace
	Suid    string   `json:"suid"`    // a setuid-root copy of id
	Tag     string   `json:"tag"`
	// net mode: the host's loopback upstream (host:port) and an abstract
	// unix socket name (without the @) bound on the host.
	Upstream string `json:"upstream"`
	Abstract string `json:"abstract"`
	// Direct are URLs fetched without a proxy, as an agent fetches its
	// base URL on the jail's loopback; each is reported as
	// direct:<url>, "<status> <body>" or the error.
	Direct []string `json:"direct"`
	// time mode: commands run in turn, N rounds; the report has each
	// one's median in microseconds.
	Runs [][]string `json:"runs"`
	N    int        `json:"n"`
	// sh mode: a shell script run with the agent's stdio; its status is
	// the agent's.
	Script string `json:"script"`
	// Plant are paths (relative to the workspace, or to the home with a
	// "~/" prefix) where the probe tries to plant a file, making the
	// directories on the way; each result is reported as plant:<path>.
	Plant []string `json:"plant"`
}

var report = map[string]string{}

func res(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "int80" {
		int80()
		fmt.Println("int80 returned")
		return
	}
	if appServer() {
		return
	}
	var p Params
	for i, a := range os.Args {
		if a == "probe" && i+1 < len(os.Args) {
			if err := json.Unmarshal([]byte(os.Args[i+1]), &p); err != nil {
				fmt.Fprintln(os.Stderr, "fakeagent: bad params:", err)
				os.Exit(3)
			}
		}
	}
	report["argv"] = strings.Join(os.Args, "\x1f")
	switch p.Mode {
	case "view":
		view()
	case "exit":
		os.Exit(p.Code)
	case "sh":
		c := exec.Command("/bin/sh", "-c", p.Script)
		c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
		err := c.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		} else if err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent:", err)
			os.Exit(127)
		}
		os.Exit(0)
	case "time":
		timeRuns(&p)
		b, _ := json.Marshal(report)
		os.Stdout.Write(b)
		return
	case "tty":
		report["stdin"], _ = os.Readlink("/proc/self/fd/0")
		var st unix.Stat_t
		if unix.Fstat(0, &st) == nil {
			report["stdin_dev"] = strconv.FormatUint(st.Dev, 10)
		}
		if ws, err := unix.IoctlGetWinsize(0, unix.TIOCGWINSZ); err == nil {
			report["winsize"] = fmt.Sprintf("%dx%d", ws.Row, ws.Col)
		}
		// Every terminal any process the jail can see holds: none may be
		// the user's (a host devpts device).
		var ttys []string
		fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
		for _, fd := range fds {
			var fst unix.Stat_t
			if unix.Stat(fd, &fst) == nil && fst.Mode&unix.S_IFMT == unix.S_IFCHR && unix.Major(fst.Rdev) >= 136 && unix.Major(fst.Rdev) <= 143 {
				ttys = append(ttys, fd+"="+strconv.FormatUint(fst.Dev, 10))
			}
		}
		report["tty_fds"] = strings.Join(ttys, " ")
		if f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err != nil {
			report["dev_tty"] = res(err)
		} else {
			var tst unix.Stat_t
			unix.Fstat(int(f.Fd()), &tst)
			f.Close()
			report["dev_tty"] = strconv.FormatUint(tst.Dev, 10)
		}
		c := byte('x')
		_, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		report["tiocsti_stdin"] = res(e)
		if e == 0 {
			report["tiocsti_stdin"] = "ok"
		}
		b, _ := json.Marshal(report)
		os.Stdout.Write(append(b, '\n'))
		os.Exit(p.Code)
	case "suspend":
		// ^Z stops it (SIGTSTP's default); SIGCONT continues it.
		cont := make(chan os.Signal, 1)
		signal.Notify(cont, syscall.SIGCONT)
		fmt.Print("READY\r\n")
		<-cont
		fmt.Print("RESUMED\r\n")
		line := make([]byte, 64)
		n, _ := os.Stdin.Read(line)
		fmt.Printf("ECHO %s\r\n", strings.TrimSpace(string(line[:n])))
		os.Exit(6)
	case "argv":
		report["pidns"], _ = os.Readlink("/proc/self/ns/pid")
		report["mntns"], _ = os.Readlink("/proc/self/ns/mnt")
		b, _ := json.Marshal(report)
		os.Stdout.Write(b)
		return
	case "nested":
		// Start the shadow again from inside, as a hook or a tool would.
		out, err := exec.Command(p.Root+"/usr/local/bin/"+p.Tag, "probe", `{"mode":"argv"}`).Output()
		report["nested"] = string(out)
		if err != nil {
			report["nested_err"] = err.Error()
		}
		report["pidns"], _ = os.Readlink("/proc/self/ns/pid")
		report["mntns"], _ = os.Readlink("/proc/self/ns/mnt")
		b, _ := json.Marshal(report)
		os.Stdout.Write(b)
		return
	case "suid":
		suidProbe(&p)
		return
	case "net":
		netProbe(&p)
		b, _ := json.Marshal(report)
		os.Stdout.Write(b)
		return
	case "mcp":
		st := os.Getenv("HOME") + "/.claude/.claude.json"
		os.WriteFile(st, []byte(`{"mcpServers":{"planted":{"command":"/tmp/evil","args":["--now"]}}}`), 0o600)
		return
	case "gitinit":
		// What a session's git init and a planted hook leave behind.
		os.MkdirAll(".git/hooks", 0o755)
		os.WriteFile(".git/hooks/pre-commit.sample", []byte("#!/bin/sh\n"), 0o755)
		os.WriteFile(".git/hooks/post-checkout", []byte("#!/bin/sh\n/tmp/evil\n"), 0o755)
		os.WriteFile(".git/config", []byte("[core]\n\tbare = false\n\tfsmonitor = /tmp/evil\n"), 0o644)
		return
	case "rootview":
		rootviewProbe()
	case "sleep":
		os.WriteFile("started-"+p.Tag, []byte(strconv.Itoa(os.Getpid())), 0o644)
		time.Sleep(time.Hour)
	case "stubborn", "plant":
		stubborn(&p)
	case "signal":
		ch := make(chan os.Signal, 1)
		signalNotify(ch)
		os.WriteFile("started-"+p.Tag, nil, 0o644)
		s := <-ch
		fmt.Println("got", s)
		os.Exit(42)
	}
	probe(&p)
	b, _ := json.Marshal(report)
	os.Stdout.Write(b)
}

func probe(p *Params) {
	home := os.Getenv("HOME")
	wd, _ := os.Getwd()
	report["cwd"] = wd
	report["env"] = strings.Join(os.Environ(), "\x1f")
	write := func(k, path string) { report[k] = res(os.WriteFile(path, []byte("jail"), 0o644)) }
	read := func(k, path string) { _, err := os.ReadFile(path); report[k] = res(err) }
	// 1, 2, 3
	write("write_usr", "/usr/cco-probe")
	write("write_etc", "/etc/cco-probe")
	write("write_home", filepath.Join(home, "cco-probe"))
	write("write_ws", filepath.Join(wd, "from-jail"))
	write("write_tmp", "/tmp/cco-probe-"+p.Tag)
	os.MkdirAll("/run/cco-probe", 0o755)
	write("write_run", "/run/cco-probe/"+p.Tag)
	// 4, 5
	report["ls_codex_packages"] = ls(filepath.Join(home, ".codex/packages"))
	write("write_codex_packages", filepath.Join(home, ".codex/packages/planted"))
	report["ls_claude_share"] = ls(filepath.Join(home, ".local/share/claude"))
	// 6, 7
	read("read_codex_auth", filepath.Join(home, ".codex/auth.json"))
	read("read_claude_creds", filepath.Join(home, ".claude/.credentials.json"))
	read("read_claude_json", filepath.Join(home, ".claude.json"))
	read("read_claude_state", filepath.Join(home, ".claude/.claude.json"))
	read("read_gemini_creds", filepath.Join(home, ".gemini/oauth_creds.json"))
	read("read_ssh", filepath.Join(home, ".ssh/id_ed25519"))
	read("read_aws", filepath.Join(home, ".aws/credentials"))
	read("read_netrc", filepath.Join(home, ".netrc"))
	read("read_gh", filepath.Join(home, ".config/gh/hosts.yml"))
	read("read_shadow", "/etc/shadow")
	read("read_gitconfig", filepath.Join(home, ".gitconfig"))
	if b, err := os.ReadFile(filepath.Join(home, ".gitconfig")); err == nil {
		report["gitconfig"] = string(b)
	}
	// 8: every way of changing a command-bearing file.
	for k, f := range map[string]string{
		"ws_hook": filepath.Join(wd, ".git/hooks/pre-commit"), "ws_gitconfig": filepath.Join(wd, ".git/config"),
		"ws_claude": filepath.Join(wd, ".claude/settings.json"), "ws_codex": filepath.Join(wd, ".codex/config.toml"),
		"home_claude": filepath.Join(home, ".claude/settings.json"), "home_codex": filepath.Join(home, ".codex/config.toml"),
		"ws_gemini": filepath.Join(wd, ".gemini/settings.json"), "home_gemini": filepath.Join(home, ".gemini/settings.json"),
		"guard": p.Root + "/usr/libexec/cco/guard/session-start",
	} {
		write("write_"+k, f)
		report["rename_"+k] = res(os.Rename(f, f+".moved"))
		report["unlink_"+k] = res(os.Remove(f))
		report["replace_"+k] = res(replace(f))
	}
	write("write_managed", "/etc/claude-code/managed-settings.d/99-x.json")
	for _, rel := range p.Plant {
		f := filepath.Join(wd, rel)
		if r, ok := strings.CutPrefix(rel, "~/"); ok {
			f = filepath.Join(home, r)
		}
		err := os.MkdirAll(filepath.Dir(f), 0o755)
		if err == nil {
			err = os.WriteFile(f, []byte("planted"), 0o644)
		}
		if err == nil {
			err = replace(f)
		}
		report["plant:"+rel] = res(err)
	}
	// 9: a protected path that did not exist.
	// 10
	write("write_symlink", filepath.Join(wd, "escape"))
	// 11
	report["capeff"] = statusField("CapEff")
	report["umount_mask"] = res(unix.Unmount(filepath.Join(home, ".codex/packages"), 0))
	report["umount_home_mask"] = res(unix.Unmount(filepath.Join(home, ".local/share/claude"), 0))
	report["mount_tmpfs"] = res(unix.Mount("tmpfs", "/mnt", "tmpfs", 0, ""))
	report["remount_rw"] = res(unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND, ""))
	// 12
	report["nnp"] = statusField("NoNewPrivs")
	report["seccomp"] = statusField("Seccomp")
	if p.Suid != "" {
		out, err := exec.Command(p.Suid, "-u").Output()
		report["suid_euid"] = strings.TrimSpace(string(out))
		if err != nil {
			report["suid_euid"] += " " + err.Error()
		}
	}
	// 13
	ptyProbes()
	// 14
	c := exec.Command("/proc/self/exe", "int80")
	out, err := c.CombinedOutput()
	report["int80"] = strings.TrimSpace(string(out) + " " + fmt.Sprint(err))
	_, _, e := unix.Syscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
	report["x32"] = res(e)
	// 15
	report["kill_host"] = res(unix.Kill(p.HostPID, 0))
	report["pid"] = strconv.Itoa(os.Getpid())
	// 17
	for i, sock := range p.Socks {
		cn, err := net.Dial("unix", sock)
		if cn != nil {
			cn.Close()
		}
		report["host_socket_"+strconv.Itoa(i)] = res(err)
	}
	// 20: claude's state file, temp file + rename.
	st := filepath.Join(home, ".claude/.claude.json")
	if err := os.WriteFile(st+".tmp", []byte(`{"renamed":true}`), 0o600); err == nil {
		report["rename_state"] = res(os.Rename(st+".tmp", st))
	} else {
		report["rename_state"] = res(err)
	}
	// The marker, as the guard would see it.
	b, err := os.ReadFile("/run/cco/jail")
	report["marker"] = string(b)
	if err != nil {
		report["marker"] = res(err)
	}
	report["uid"] = strconv.Itoa(os.Getuid())
}

func replace(f string) error {
	tmp := f + ".new"
	if err := os.WriteFile(tmp, []byte("x"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, f)
}

func ls(d string) string {
	ents, err := os.ReadDir(d)
	if err != nil {
		return res(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return "[" + strings.Join(n, ",") + "]"
}

func statusField(k string) string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if kk, v, ok := strings.Cut(l, ":"); ok && kk == k {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func ptyProbes() {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		report["pty"] = res(err)
		return
	}
	defer m.Close()
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		report["pty"] = res(err)
		return
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		report["pty"] = res(err)
		return
	}
	defer s.Close()
	c := byte('x')
	ioctl := func(req uint64) string {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, s.Fd(), uintptr(req), uintptr(unsafe.Pointer(&c)))
		if e == 0 {
			return "ok"
		}
		return unix.ErrnoName(e)
	}
	report["tiocsti"] = ioctl(unix.TIOCSTI)
	report["tiocsti_high"] = ioctl(1<<32 | unix.TIOCSTI)
	report["tioclinux"] = ioctl(unix.TIOCLINUX)
	_, err = unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	report["tcgets"] = res(err)
}

// appServer plays `codex app-server --listen unix://PATH` far enough for
// the helper's app-server mode: it listens until it is stopped. A client
// started with --remote reports its argv.
func appServer() bool {
	for i, a := range os.Args {
		if a == "app-server" && i+2 < len(os.Args) && os.Args[i+1] == "--listen" {
			l, err := net.Listen("unix", strings.TrimPrefix(os.Args[i+2], "unix://"))
			if err != nil {
				fmt.Fprintln(os.Stderr, "fakeagent app-server:", err)
				os.Exit(1)
			}
			for {
				c, err := l.Accept()
				if err != nil {
					os.Exit(1)
				}
				c.Close()
			}
		}
		if a == "--remote" {
			report["argv"] = strings.Join(os.Args, "\x1f")
			b, _ := json.Marshal(report)
			os.Stdout.Write(b)
			return true
		}
	}
	return false
}
