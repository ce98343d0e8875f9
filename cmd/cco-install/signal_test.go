package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/testenv"
)

// ^C (a real SIGINT) or SIGTERM during a download stops the run at once:
// the step in flight fails and rolls back, "interrupted" is said, the exit
// code is 130 or 143, and the JSON report is still one document.
func TestInterruptStopsTheRun(t *testing.T) {
	for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143} {
		t.Run(sig.String(), func(t *testing.T) {
			asked := make(chan struct{}, 8)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked <- struct{}{}
				<-r.Context().Done() // a store that never answers
			}))
			defer srv.Close()
			root := t.TempDir()
			shadow := filepath.Join(t.TempDir(), "shadow")
			os.WriteFile(shadow, []byte("#!/bin/sh\necho shadow\n"), 0o755)
			cmd := installer(t, root, shadow, []string{"CCO_AGENTS=claude", "CCO_CLAUDE_BASE_URL=" + srv.URL, "CCO_DOWNLOAD_TIMEOUT=60s"})
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-asked:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("the installer never asked the store; stderr: %s", stderr.String())
			}
			sent := time.Now()
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			if took := time.Since(sent); took > 3*time.Second {
				t.Errorf("the run took %v to stop after %v", took, sig)
			}
			if code := cmd.ProcessState.ExitCode(); code != want {
				t.Fatalf("exit %d (%v), want %d; stderr: %s", code, err, want, stderr.String())
			}
			if !strings.Contains(stderr.String(), "cco-install: interrupted") {
				t.Errorf("stderr does not say interrupted: %s", stderr.String())
			}
			if strings.Contains(stderr.String(), "retrying") {
				t.Errorf("an interrupted run must not retry: %s", stderr.String())
			}
			var rep struct {
				Interrupted bool `json:"interrupted"`
				Steps       []struct {
					ID, Status string
				} `json:"steps"`
			}
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout.String())
			}
			if !rep.Interrupted {
				t.Errorf("the report does not say interrupted: %s", stdout.String())
			}
			last := rep.Steps[len(rep.Steps)-1]
			if last.ID != "vendor.claude" || last.Status != "failed" {
				t.Errorf("the step in flight: %+v, want vendor.claude failed", last)
			}
			ents, _ := os.ReadDir(filepath.Join(root, "usr/libexec/cco/claude"))
			for _, e := range ents {
				t.Errorf("left behind by the interrupted step: %s", e.Name())
			}
		})
	}
}

// SIGTERM ends a run at any point: one stuck in a read that no context
// reaches (a FIFO no one writes) while it holds the lock ends with 143
// within the grace, saying so, and the lock is free at once for the next
// run; a second run waiting for that lock ends on SIGTERM too.
func TestSigtermEndsABlockedRun(t *testing.T) {
	root := t.TempDir()
	shadow := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(shadow, []byte("#!/bin/sh\necho shadow\n"), 0o755)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	stuck := installer(t, root, shadow, []string{"CCO_TEST_BLOCK_AFTER=shadow.codex:" + fifo})
	var stuckErr testenv.SyncBuffer
	stuck.Stderr = &stuckErr
	if err := stuck.Start(); err != nil {
		t.Fatal(err)
	}
	defer stuck.Process.Kill()
	waitFor(t, fifo+".blocked", &stuckErr)

	// A second run waits for the lock the stuck one holds.
	waiter := installer(t, root, shadow, []string{"CCO_LOCK_TIMEOUT=10m"})
	var waitErr testenv.SyncBuffer
	waiter.Stderr = &waitErr
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	defer waiter.Process.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(waitErr.String(), "waiting for another cco-install") {
		if time.Now().After(deadline) {
			t.Fatalf("the second run never waited for the lock: %s", waitErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, tc := range []struct {
		name   string
		cmd    *exec.Cmd
		stderr *testenv.SyncBuffer
		within time.Duration
		says   string
	}{
		{"waiting for the lock", waiter, &waitErr, time.Second, "stopped while waiting for another cco-install"},
		{"stuck in a read, holding the lock", stuck, &stuckErr, stopGrace + 2*time.Second, "did not stop within"},
	} {
		sent := time.Now()
		tc.cmd.Process.Signal(syscall.SIGTERM)
		tc.cmd.Wait()
		if took := time.Since(sent); took > tc.within {
			t.Errorf("%s: took %v to end after SIGTERM, want under %v", tc.name, took, tc.within)
		}
		if code := tc.cmd.ProcessState.ExitCode(); code != 143 {
			t.Errorf("%s: exit %d, want 143; stderr: %s", tc.name, code, tc.stderr.String())
		}
		if !strings.Contains(tc.stderr.String(), "cco-install: interrupted") || !strings.Contains(tc.stderr.String(), tc.says) {
			t.Errorf("%s: stderr does not say why it ended: %s", tc.name, tc.stderr.String())
		}
	}
	// The lock died with the stuck run: the next run takes it at once and
	// converges.
	next := installer(t, root, shadow, nil)
	var nextErr bytes.Buffer
	next.Stderr = &nextErr
	start := time.Now()
	runReport(t, next)
	if strings.Contains(nextErr.String(), "waiting for another") || time.Since(start) > 10*time.Second {
		t.Errorf("the next run waited for a lock: %s", nextErr.String())
	}
}

// waitFor waits until the file p exists (a test hook's sign).
func waitFor(t *testing.T, p string, stderr *testenv.SyncBuffer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(p); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared; stderr: %s", p, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
