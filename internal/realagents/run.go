package realagents

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A real agent offline does not stop on its own: it retries the model it
// cannot reach, or waits at a login prompt. These run one until its output
// shows what the test waits for, then end its process group.

// RunUntil starts c (in a process group of its own) with its output in
// the file outPath and an empty stdin, then waits as WaitFor does.
func RunUntil(t testing.TB, c *exec.Cmd, outPath string, within time.Duration, done func(string) bool) string {
	t.Helper()
	f, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.SysProcAttr.Setpgid = true
	c.Stdout, c.Stderr, c.Stdin = f, f, strings.NewReader("")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return WaitFor(t, c, func() string { b, _ := os.ReadFile(outPath); return string(b) }, within, done)
}

// WaitFor waits for the started c, which runs in a process group of its
// own, until it exits, done(output()) holds, or within passes; then it
// kills the group and returns the output. A deadline is no failure here:
// the caller's assertions on the output say what was missing.
func WaitFor(t testing.TB, c *exec.Cmd, output func() string, within time.Duration, done func(string) bool) string {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	deadline := time.After(within)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-exited:
			return output()
		case <-deadline:
			break wait
		case <-tick.C:
			if done(output()) {
				break wait
			}
		}
	}
	syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Errorf("%s did not end after SIGKILL to its process group", c.Path)
	}
	return output()
}
