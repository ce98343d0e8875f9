package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
