package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/jailtest/agentio"
)

// ProcParams are the probe's parameters for the classes of every process
// the jail shows (sandbox/attack/hostenv_test.go), read from the same
// argument as Params.
type ProcParams struct {
	// Procs reads /proc/PID/environ and cmdline of every process the
	// jail shows, and the probe's own environment: "procs" and "env".
	Procs bool `json:"procs"`
	// Trace tries to reach into every other process the jail shows
	// (ptrace attach and seize, process_vm_readv, /proc/PID/mem,
	// pidfd_getfd, /proc/PID/environ), and into a child of its own as the
	// control: "trace".
	Trace bool `json:"trace"`
}

// Proc is what the probe read of one process.
type Proc struct {
	Pid     int    `json:"pid"`
	Comm    string `json:"comm"`
	Cmdline string `json:"cmdline"` // NUL-separated, or "error: ..."
	Environ string `json:"environ"` // NUL-separated, or "error: ..."
	// The attempts to reach into it (Trace): "ok" or the errno.
	Attach  string `json:"attach,omitempty"`
	Seize   string `json:"seize,omitempty"`
	VMRead  string `json:"vm_read,omitempty"`
	Mem     string `json:"mem,omitempty"`
	GetFD   string `json:"getfd,omitempty"`
	Control bool   `json:"control,omitempty"` // the probe's own child
}

func procClasses() {
	var p ProcParams
	if agentio.Params(os.Args, &p) != nil {
		return
	}
	if p.Procs {
		b, _ := json.Marshal(readProcs(nil))
		report["procs"] = string(b)
		e, _ := json.Marshal(os.Environ())
		report["env"] = string(e)
	}
	if p.Trace {
		report["trace"] = traceAll()
	}
}

func readFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "error: " + errName(err)
	}
	return string(b)
}

func errName(err error) string {
	var e syscall.Errno
	for err != nil {
		if en, ok := err.(syscall.Errno); ok {
			e = en
			break
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			break
		}
		err = u.Unwrap()
	}
	if e != 0 {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

// pids are the processes the jail shows, but this one.
func pids() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n != os.Getpid() {
			out = append(out, n)
		}
	}
	return out
}

func readProcs(extra []int) []Proc {
	var out []Proc
	for _, pid := range append(pids(), extra...) {
		d := "/proc/" + strconv.Itoa(pid)
		out = append(out, Proc{Pid: pid, Comm: strings.TrimSpace(readFile(d + "/comm")),
			Cmdline: readFile(d + "/cmdline"), Environ: readFile(d + "/environ")})
	}
	return out
}

// traceAll tries every way into every process, and into a child of the
// probe's own (whose attempts must succeed: they show the kernel lets a
// process of this user be traced in the jail at all).
func traceAll() string {
	ctl := exec.Command("/bin/sleep", "30")
	ctlPid := 0
	if ctl.Start() == nil {
		ctlPid = ctl.Process.Pid
		defer func() { ctl.Process.Kill(); ctl.Wait() }()
		time.Sleep(50 * time.Millisecond) // past its exec
	}
	var out []Proc
	for _, p := range readProcs(nil) {
		if strings.Contains(p.Cmdline, "/bin/sh") || p.Pid == ctlPid {
			continue
		}
		out = append(out, tryInto(p))
	}
	if ctlPid != 0 {
		c := tryInto(Proc{Pid: ctlPid, Comm: "sleep", Environ: readFile("/proc/" + strconv.Itoa(ctlPid) + "/environ")})
		c.Control = true
		out = append(out, c)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func result(err error) string {
	if err == nil {
		return "ok"
	}
	return errName(err)
}

func tryInto(p Proc) Proc {
	pid := p.Pid
	// ptrace is the calling thread's: attach, wait and detach on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.PtraceAttach(pid); err == nil {
		p.Attach = "ok"
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, unix.WALL, nil)
		unix.PtraceDetach(pid)
	} else {
		p.Attach = result(err)
	}
	if err := unix.PtraceSeize(pid); err == nil {
		p.Seize = "ok"
		unix.PtraceDetach(pid)
		// A seized process is not stopped: detach needs it stopped.
		if unix.PtraceInterrupt(pid) == nil {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WALL, nil)
			unix.PtraceDetach(pid)
		}
	} else {
		p.Seize = result(err)
	}
	var buf [16]byte
	local := []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}}
	remote := []unix.RemoteIovec{{Base: 0x400000, Len: len(buf)}}
	_, err := unix.ProcessVMReadv(pid, local, remote, 0)
	// EFAULT: access was granted, the address is not mapped there.
	p.VMRead = result(err)
	if f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem"); err == nil {
		p.Mem = "ok"
		f.Close()
	} else {
		p.Mem = result(err)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		p.GetFD = "pidfd_open " + result(err)
	} else {
		got, err := unix.PidfdGetfd(fd, 0, 0)
		if err == nil {
			unix.Close(got)
		}
		p.GetFD = result(err)
		unix.Close(fd)
	}
	return p
}
