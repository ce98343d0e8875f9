package supervise

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Stopped reads the host's /proc: a running process is not stopped, one
// that SIGSTOP stopped is; firstChild is the earliest started child,
// whichever thread started it.
func TestStoppedAndFirstChild(t *testing.T) {
	first := exec.Command("/bin/sleep", "30")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { first.Process.Kill(); first.Wait() }()
	time.Sleep(20 * time.Millisecond)
	second := exec.Command("/bin/sleep", "30")
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { second.Process.Kill(); second.Wait() }()
	if got := firstChild(os.Getpid()); got != first.Process.Pid {
		t.Errorf("firstChild = %d, want the earliest child %d (the later is %d)", got, first.Process.Pid, second.Process.Pid)
	}
	if Stopped(first.Process.Pid) {
		t.Error("a sleeping process reads as stopped")
	}
	syscall.Kill(first.Process.Pid, syscall.SIGSTOP)
	deadline := time.Now().Add(5 * time.Second)
	for !Stopped(first.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("a process stopped by SIGSTOP never read as stopped")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if Stopped(0) || Stopped(-1) || firstChild(0) != 0 {
		t.Error("no process reads as a stopped one or as a child")
	}
	// A stopped child of the helper (here: this process's first child's
	// parent stands for pid 1, this process for the helper) counts only as
	// the leader of the foreground group.
	if TerminalAgentStopped(os.Getppid(), first.Process.Pid, false) {
		t.Error("a stopped process that leads no process group reads as the stopped agent")
	}
	if TerminalAgentStopped(os.Getppid(), 0, false) || TerminalAgentStopped(os.Getpid(), 0, true) {
		t.Error("no foreground group reads as a stopped agent")
	}
	// With the helper as pid 1 (cco's engine; this process stands for
	// it), only its first child counts, and only as a group leader.
	if TerminalAgentStopped(os.Getpid(), first.Process.Pid, true) {
		t.Error("a stopped first child that leads no process group reads as the stopped agent")
	}
	leader := exec.Command("/bin/sleep", "30")
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { leader.Process.Kill(); leader.Wait() }()
	syscall.Kill(leader.Process.Pid, syscall.SIGSTOP)
	for deadline := time.Now().Add(5 * time.Second); !Stopped(leader.Process.Pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a process stopped by SIGSTOP never read as stopped")
		}
	}
	if TerminalAgentStopped(os.Getpid(), leader.Process.Pid, true) {
		t.Error("a stopped group leader started after pid 1's first child (an orphan) reads as the stopped agent")
	}
}

// Exited: a child that ended and is not reaped reads as exited; a running
// one, and one reaped, do not.
func TestExited(t *testing.T) {
	c := exec.Command("/bin/sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if Exited(c.Process.Pid) {
		t.Error("a running process reads as exited")
	}
	syscall.Kill(c.Process.Pid, syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); !Exited(c.Process.Pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a killed, unreaped child never read as exited")
		}
	}
	c.Wait()
	if Exited(c.Process.Pid) || Exited(0) {
		t.Error("a reaped process, or none, reads as exited")
	}
}
