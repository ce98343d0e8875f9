package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/testenv"
)

// openPTY opens a pseudo-terminal pair: the test's side and the installer's.
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testenv.Missing(t, "no /dev/ptmx: "+err.Error())
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// --uninstall on a terminal shows its plan and asks "Proceed? [y/N]": "n"
// (or anything but y) changes nothing, "y" uninstalls.
func TestUninstallAsksOnATerminal(t *testing.T) {
	root := t.TempDir()
	shadow := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(shadow, []byte("#!/bin/sh\n"), 0o755)
	runReport(t, installer(t, root, shadow, nil))
	for _, tc := range []struct {
		answer string
		gone   bool
	}{{"n", false}, {"y", true}} {
		m, s := openPTY(t)
		cmd := installer(t, root, shadow, nil, "--uninstall")
		cmd.Args = append(cmd.Args[:3], cmd.Args[4:]...) // text report: drop --json
		cmd.Stdin, cmd.Stderr = s, s
		var out strings.Builder
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		seen := make(chan string, 1)
		go func() {
			r := bufio.NewReader(m)
			var buf strings.Builder
			for {
				b, err := r.ReadByte()
				if err != nil {
					seen <- buf.String()
					return
				}
				buf.WriteByte(b)
				if strings.HasSuffix(buf.String(), "Proceed? [y/N] ") {
					seen <- buf.String()
					m.Write([]byte(tc.answer + "\n"))
					// Drain the rest so the installer never blocks on the pty.
					for {
						if _, err := r.ReadByte(); err != nil {
							return
						}
					}
				}
			}
		}()
		var prompt string
		select {
		case prompt = <-seen:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Fatal("no prompt on the terminal")
		}
		if !strings.Contains(prompt, "uninstall.shadow.claude") || !strings.Contains(prompt, "Proceed? [y/N] ") {
			t.Errorf("the prompt does not show the plan first:\n%s", prompt)
		}
		err := cmd.Wait()
		_, statErr := os.Lstat(filepath.Join(root, "usr/local/bin/claude"))
		if gone := os.IsNotExist(statErr); gone != tc.gone {
			t.Errorf("answer %q: shadow gone = %v (exit %v)", tc.answer, gone, err)
		}
		if !tc.gone && cmd.ProcessState.ExitCode() != 1 {
			t.Errorf("answer n: exit %d, want 1", cmd.ProcessState.ExitCode())
		}
	}
}
