package agentio

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

func TestParams(t *testing.T) {
	var p struct {
		Mode string `json:"mode"`
	}
	if err := Params([]string{"agent", "--no-chrome", "probe", `{"mode":"exit"}`}, &p); err != nil || p.Mode != "exit" {
		t.Errorf("Params = %v, mode %q", err, p.Mode)
	}
	if err := Params([]string{"agent", "probe", `{"mode":`}, &p); err == nil {
		t.Error("a bad argument decoded")
	}
	p.Mode = "kept"
	if err := Params([]string{"agent", "probe"}, &p); err != nil || p.Mode != "kept" {
		t.Errorf("no argument after probe: %v, mode %q", err, p.Mode)
	}
}

func TestResult(t *testing.T) {
	_, err := os.Open("/nonexistent/cco")
	for want, err := range map[string]error{"ok": nil, "ENOENT": err, "EPERM": fmt.Errorf("wrapped: %w", syscall.EPERM), "plain": fmt.Errorf("plain")} {
		if got := Result(err); got != want {
			t.Errorf("Result(%v) = %q, want %q", err, got, want)
		}
	}
}
