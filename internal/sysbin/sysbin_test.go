package sysbin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Plant puts an executable name in a new directory, first on PATH, whose
// running leaves a file behind; it returns that file's path.
func plant(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\necho \"$0\" >> "+ran+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return ran
}

// TestPathIgnoresPATH: a program planted first on PATH is not what Path
// finds, and Command runs the system's, with the system's PATH.
func TestPathIgnoresPATH(t *testing.T) {
	ran := plant(t, "true", "sh")
	p, err := Path("true")
	if err != nil || !filepath.IsAbs(p) || !strings.HasPrefix(p, "/usr/") && !strings.HasPrefix(p, "/bin") {
		t.Fatalf("Path(true) = %q, %v", p, err)
	}
	c, err := Command(context.Background(), "true")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if c.Path != p || !containsKV(c.Env, "PATH="+PATH()) {
		t.Errorf("Command ran %s with %q", c.Path, c.Env)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("the planted program ran")
	}
}

func containsKV(env []string, kv string) bool {
	n := 0
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			n++
			if e != kv {
				return false
			}
		}
	}
	return n == 1
}

// TestPathRefuses: a name with a slash, a missing program, and a
// directory or file that someone besides root can change are no answer.
func TestPathRefuses(t *testing.T) {
	for _, n := range []string{"", "../bin/true", "/usr/bin/true", "cco-no-such-program"} {
		if p, err := Path(n); err == nil {
			t.Errorf("Path(%q) = %q", n, p)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("the ownership cases need root")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	prog := filepath.Join(dir, "prog")
	os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755)
	if p, err := PathIn([]string{dir}, "prog"); err != nil || p != prog {
		t.Fatalf("PathIn = %q, %v, want %s", p, err, prog)
	}
	for what, change := range map[string]func(){
		"a group-writable directory": func() { os.Chmod(dir, 0o775) },
		"a world-writable file":      func() { os.Chmod(prog, 0o757) },
		"a file another user owns":   func() { os.Chown(prog, 4242, 4242) },
		"a file not executable":      func() { os.Chmod(prog, 0o644) },
	} {
		change()
		if p, err := PathIn([]string{dir}, "prog"); err == nil {
			t.Errorf("%s: PathIn = %q", what, p)
		}
		os.Chmod(dir, 0o755)
		os.Chmod(prog, 0o755)
		os.Chown(prog, 0, 0)
	}
}
