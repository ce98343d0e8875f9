package main

import (
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// view reports what the jail shows, in forms that two engines building the
// same jail must agree on: its mounts (normalised from
// /proc/self/mountinfo: mount point, filesystem type, the per-mount flags,
// and, for a bind, the path it shows of its filesystem), its environment,
// its credentials and protections, and what it may do to the jail's other
// processes.
func view() {
	report["mounts"] = mounts()
	env := os.Environ()
	sort.Strings(env)
	report["env"] = strings.Join(env, "\n")
	for _, k := range []string{"Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters"} {
		report["status_"+k] = statusField(k)
	}
	wd, _ := os.Getwd()
	report["cwd"] = wd
	host, _ := os.Hostname()
	report["hostname"] = host
	report["pid"] = strconv.Itoa(os.Getpid())
	// A user namespace of the jail's own: refused.
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}})
	if err == nil {
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
	}
	report["new_userns"] = res(err)
	// Every other process in the jail (the engine's init, the helper):
	// neither traced nor read.
	var others []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n == os.Getpid() {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		_, merr := os.ReadFile("/proc/" + e.Name() + "/environ")
		perr := unix.PtraceAttach(n)
		if perr == nil {
			var ws unix.WaitStatus
			unix.Wait4(n, &ws, unix.WALL, nil)
			unix.PtraceDetach(n)
		}
		others = append(others, strings.TrimSpace(string(comm))+" environ="+res(merr)+" ptrace="+res(perr))
	}
	sort.Strings(others)
	report["others"] = strings.Join(others, "\n")
}

func mounts() string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return res(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if len(f) < 6 || sep < 0 || sep+1 >= len(f) {
			continue
		}
		fstype := f[sep+1]
		var flags []string
		for _, o := range strings.Split(f[5], ",") {
			switch o {
			case "ro", "rw", "nosuid", "nodev", "noexec":
				flags = append(flags, o)
			}
		}
		sort.Strings(flags)
		root := ""
		if fstype != "tmpfs" && f[3] != "/" {
			root = " " + f[3]
		}
		out = append(out, f[4]+" "+fstype+" "+strings.Join(flags, ",")+root)
	}
	return strings.Join(out, "\n")
}
