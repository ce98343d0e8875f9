package engine

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// lockDown drops every capability of the thread that will exec the jail's
// pid 1 (the bounding set, the ambient and inheritable sets, then permitted
// and effective), sets no_new_privs on it, puts it under the Landlock
// layer and installs the seccomp program on it. The exec that follows
// leaves that thread alone in the process, so every thread the jail's pid
// 1 and the agent ever have starts from these credentials: the runtime's
// other threads, which keep theirs, end at the exec. (Dropping the
// bounding set on every thread with AllThreadsSyscall cost 4 to 6 ms a
// launch, a stop of the world for each capability.) The caller holds the
// thread (runtime.LockOSThread) from before the first call until the exec.
func (c *child) lockDown() error {
	last := capLast()
	for cp := 0; cp <= last; cp++ {
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(cp), 0); e != 0 && e != unix.EINVAL {
			return fmt.Errorf("dropping capability %d: %w", cp, e)
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("clearing the ambient capabilities: %w", e)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("dropping the capabilities: %w", e)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e != 0 {
		return fmt.Errorf("setting no_new_privs: %w", e)
	}
	if len(c.landlock) > 0 && LandlockABI() > 0 {
		if err := landlockRestrict(c.landlock); err != nil {
			return err
		}
	}
	if c.seccompFD <= 0 {
		return nil
	}
	f := fileOf(c.seccompFD)
	prog, err := readAll(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("reading the seccomp program: %w", err)
	}
	if len(prog) == 0 || len(prog)%8 != 0 {
		return fmt.Errorf("the seccomp program is %d bytes, not a whole number of instructions", len(prog))
	}
	fprog := unix.SockFprog{Len: uint16(len(prog) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
	if _, _, e := syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("installing the seccomp program: %w", e)
	}
	return nil
}

// loopbackUp brings up lo in the jail's network namespace, as bwrap does:
// the kernel gives it 127.0.0.1 and ::1.
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr)
}
