package appserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envHelper) == "1":
		var args []string
		_ = json.Unmarshal([]byte(os.Getenv(envHelper+"_ARGS")), &args)
		// Its children, without the helper variable, are the mock codex.
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, envHelper+"=") {
				env = append(env, kv)
			}
		}
		if os.Getenv(envHelper+"_DIRECT") == "1" {
			// Streams that are not the process's own: no pty.Run.
			os.Exit(Run(os.Args[0], args, env, strings.NewReader(""), struct{ io.Writer }{os.Stdout}, os.Stderr))
		}
		os.Exit(Run(os.Args[0], args, env, os.Stdin, os.Stdout, os.Stderr))
	case os.Getenv(envMock) == "1":
		mockMain(os.Args[1:])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// mockEnv is the environment for a mock codex that reports into dir.
func mockEnv(t *testing.T, extra ...string) (env []string, reports string) {
	reports = t.TempDir()
	env = append(os.Environ(), envMock+"=1", envReports+"="+reports, "HOME="+t.TempDir())
	return append(env, extra...), reports
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the mock left no report: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// gone reports whether no process has pid any more.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestRunWiring(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	env, reports := mockEnv(t, envClientExit+"=7")
	args := []string{"-c", "model=o3", "--enable", "f1", "--no-alt-screen", "-C", ws,
		"agents", "--config=k=v", "--disable=f2", "-ck2=v2"}
	var out, errb bytes.Buffer
	code := Run(os.Args[0], args, env, strings.NewReader("typed\n"), &out, &errb)
	if code != 7 {
		t.Fatalf("Run = %d, want the client's 7; stderr:\n%s", code, errb.String())
	}

	var srv serverReport
	readJSON(t, filepath.Join(reports, "server.json"), &srv)
	sock := strings.TrimPrefix(srv.Listen, "unix://")
	dir := filepath.Dir(sock)
	wantFlags := []string{"-c", "model=o3", "--enable", "f1", "--config=k=v", "--disable=f2", "-ck2=v2"}
	if want := append(append([]string{}, wantFlags...), "app-server", "--listen", srv.Listen); !reflect.DeepEqual(srv.Args, want) {
		t.Errorf("server argv %q, want %q (no --no-alt-screen, no -C, no subcommand)", srv.Args, want)
	}
	if filepath.Base(sock) != "server.sock" || filepath.Dir(dir) != filepath.Clean(os.TempDir()) {
		t.Errorf("socket %s, want a server.sock in a fresh directory of %s", sock, os.TempDir())
	}
	if srv.DirMode != 0o700 {
		t.Errorf("socket directory mode %o, want 700", srv.DirMode)
	}
	if srv.Cwd != ws {
		t.Errorf("server cwd %s, want the -C directory %s", srv.Cwd, ws)
	}

	var cl clientReport
	readJSON(t, filepath.Join(reports, "client.json"), &cl)
	if want := append([]string{"--remote", srv.Listen}, args...); !reflect.DeepEqual(cl.Args, want) {
		t.Errorf("client argv %q, want %q", cl.Args, want)
	}
	wantReply := "hello client from cwd=" + ws + " flags=" + strings.Join(wantFlags, " ")
	if cl.Reply != wantReply || !strings.Contains(out.String(), "REPLY "+wantReply) {
		t.Errorf("the client heard %q (stdout %q), want %q", cl.Reply, out.String(), wantReply)
	}
	if !strings.Contains(out.String(), "STDIN typed") {
		t.Errorf("the client did not get Run's stdin: %q", out.String())
	}

	// After the client: the server was stopped with SIGTERM and the
	// directory is gone.
	if _, err := os.Stat(filepath.Join(reports, "server-term.json")); err != nil {
		t.Errorf("the server never got SIGTERM: %v", err)
	}
	if !gone(srv.Pid) {
		t.Errorf("the server (pid %d) still runs", srv.Pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket directory %s was not removed: %v", dir, err)
	}
}

func TestRunWithoutCdUsesCurrentDirectory(t *testing.T) {
	t.Parallel()
	env, reports := mockEnv(t)
	var out, errb bytes.Buffer
	if code := Run(os.Args[0], []string{"agents"}, env, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("Run = %d; stderr:\n%s", code, errb.String())
	}
	var srv serverReport
	readJSON(t, filepath.Join(reports, "server.json"), &srv)
	if wd, _ := os.Getwd(); srv.Cwd != wd {
		t.Errorf("server cwd %s, want the current directory %s", srv.Cwd, wd)
	}
	if want := []string{"app-server", "--listen", srv.Listen}; !reflect.DeepEqual(srv.Args, want) {
		t.Errorf("server argv %q, want %q", srv.Args, want)
	}
}

func TestServerThatNeverListens(t *testing.T) {
	old := listenTimeout
	defer func() { listenTimeout = old }()
	for _, c := range []struct {
		mode, msg, log string
		timeout        time.Duration
	}{
		{"never", "did not listen", "waiting for a lock that never comes", time.Second},
		{"exit", "exited with status 3 before listening", "error loading config.toml: bad key", old},
	} {
		t.Run(c.mode, func(t *testing.T) {
			listenTimeout = c.timeout
			env, reports := mockEnv(t, envServerMode+"="+c.mode)
			var out, errb bytes.Buffer
			code := Run(os.Args[0], []string{"agents"}, env, strings.NewReader(""), &out, &errb)
			if code != ExitServerFailed {
				t.Errorf("Run = %d, want %d", code, ExitServerFailed)
			}
			if !strings.Contains(errb.String(), c.msg) || !strings.Contains(errb.String(), c.log) {
				t.Errorf("stderr %q, want %q and the server's log %q", errb.String(), c.msg, c.log)
			}
			if _, err := os.Stat(filepath.Join(reports, "client.json")); err == nil {
				t.Error("the client ran without a server")
			}
			var srv serverReport
			readJSON(t, filepath.Join(reports, "server.json"), &srv)
			if !gone(srv.Pid) {
				t.Errorf("the server (pid %d) still runs", srv.Pid)
			}
			if _, err := os.Stat(filepath.Dir(strings.TrimPrefix(srv.Listen, "unix://"))); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the socket directory was not removed: %v", err)
			}
		})
	}
}

func TestServerIgnoringTermIsKilled(t *testing.T) {
	if killGrace != 2*time.Second {
		t.Errorf("the grace before SIGKILL is %s, want 2s", killGrace)
	}
	old := killGrace
	killGrace = 300 * time.Millisecond
	defer func() { killGrace = old }()
	env, reports := mockEnv(t, envServerMode+"=ignore-term")
	var out, errb bytes.Buffer
	start := time.Now()
	result := make(chan int, 1)
	go func() { result <- Run(os.Args[0], []string{"agents"}, env, strings.NewReader(""), &out, &errb) }()
	var code int
	select {
	case code = <-result:
	case <-time.After(15 * time.Second):
		var srv serverReport
		readJSON(t, filepath.Join(reports, "server.json"), &srv)
		_ = syscall.Kill(-srv.Pid, syscall.SIGKILL)
		t.Fatal("Run did not return: the server that ignores SIGTERM was never killed")
	}
	if code != 0 {
		t.Fatalf("Run = %d; stderr:\n%s", code, errb.String())
	}
	if d := time.Since(start); d < killGrace {
		t.Errorf("Run returned after %s, before the grace of %s", d, killGrace)
	}
	var srv serverReport
	readJSON(t, filepath.Join(reports, "server.json"), &srv)
	if !gone(srv.Pid) {
		t.Errorf("the server (pid %d) still runs", srv.Pid)
	}
}

func TestMissingCodex(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "codex")
	var out, errb bytes.Buffer
	if code := Run(missing, []string{"agents"}, os.Environ(), strings.NewReader(""), &out, &errb); code != ExitNotFound {
		t.Errorf("Run = %d, want %d", code, ExitNotFound)
	}
	if !strings.Contains(errb.String(), missing) {
		t.Errorf("stderr %q does not name %s", errb.String(), missing)
	}
}

func TestBadCdDirectory(t *testing.T) {
	t.Parallel()
	env, reports := mockEnv(t)
	missing := filepath.Join(t.TempDir(), "nowhere")
	var out, errb bytes.Buffer
	if code := Run(os.Args[0], []string{"-C", missing, "agents"}, env, strings.NewReader(""), &out, &errb); code != ExitServerFailed {
		t.Errorf("Run = %d, want %d", code, ExitServerFailed)
	}
	if !strings.Contains(errb.String(), missing) {
		t.Errorf("stderr %q does not name %s", errb.String(), missing)
	}
	if _, err := os.Stat(filepath.Join(reports, "server.json")); err == nil {
		t.Error("a server was started for a bad -C")
	}
}

func TestSocketDirNeverInCodexHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TMPDIR", filepath.Join(home, ".codex", "tmp"))
	if err := os.MkdirAll(os.TempDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]string{
		{"HOME=" + home},
		{"HOME=/nonexistent", "CODEX_HOME=" + filepath.Join(home, ".codex")},
	} {
		_, err := makeSocketDir(env)
		if err == nil || !strings.Contains(err.Error(), "CODEX_HOME") || !strings.Contains(err.Error(), "TMPDIR") {
			t.Errorf("env %q: err %v, want a refusal naming CODEX_HOME and the fix", env, err)
		}
	}
	if entries, _ := os.ReadDir(os.TempDir()); len(entries) != 0 {
		t.Errorf("a refused directory was created: %v", entries)
	}
	dir, err := makeSocketDir([]string{"HOME=" + t.TempDir()})
	if err != nil {
		t.Fatalf("a temp dir outside CODEX_HOME was refused: %v", err)
	}
	os.RemoveAll(dir)
}

func TestSocketPathTooLong(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()+"/"+strings.Repeat("d", 100))
	if err := os.MkdirAll(os.TempDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := makeSocketDir(nil); err == nil || !strings.Contains(err.Error(), "TMPDIR") {
		t.Errorf("err %v, want a refusal of the long socket path with the fix", err)
	}
	if entries, _ := os.ReadDir(os.TempDir()); len(entries) != 0 {
		t.Errorf("the refused directory was left behind: %v", entries)
	}
}

// TestSignalsStopServer runs Run in a process of its own, as the in-jail
// helper does, and signals it while the client runs: with the process's own
// stdio (the client goes through pty.Run) and with other streams (Run
// forwards the signal to the client itself).
func TestSignalsStopServer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		direct string
		sig    syscall.Signal
		want   int // the client's status
	}{
		{"0", syscall.SIGTERM, 60 + 15}, // forwarded by pty.Run, handled
		{"0", syscall.SIGHUP, 60 + 1},
		{"0", syscall.SIGINT, 9}, // not forwarded: the server's end ends the client
		{"1", syscall.SIGTERM, 60 + 15},
		{"1", syscall.SIGHUP, 60 + 1},
		{"1", syscall.SIGINT, 128 + 2},
	} {
		t.Run(c.sig.String()+"/direct="+c.direct, func(t *testing.T) {
			t.Parallel()
			env, reports := mockEnv(t, envClientMode+"=hang", envHelper+"=1", envHelper+`_ARGS=["agents"]`,
				envHelper+"_DIRECT="+c.direct)
			cmd := exec.Command(os.Args[0])
			cmd.Env = env
			stdout, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdout.Close()
			var errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = w, &errb
			// Its own process group, so that a failing test can end the
			// helper and the client it started.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.WaitDelay = time.Second
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			killAll := func() {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				var srv serverReport
				if b, err := os.ReadFile(filepath.Join(reports, "server.json")); err == nil && json.Unmarshal(b, &srv) == nil && srv.Pid > 0 {
					_ = syscall.Kill(-srv.Pid, syscall.SIGKILL)
				}
			}
			hung := time.AfterFunc(15*time.Second, killAll)
			defer hung.Stop()
			defer func() {
				if cmd.ProcessState == nil {
					killAll()
					_ = cmd.Wait()
				}
			}()
			if err := waitLine(stdout, "READY"); err != nil {
				t.Fatalf("the client never got ready: %v; stderr:\n%s", err, errb.String())
			}
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			var srv serverReport
			readJSON(t, filepath.Join(reports, "server.json"), &srv)
			var cl clientReport
			readJSON(t, filepath.Join(reports, "client.json"), &cl)
			if got := cmd.ProcessState.ExitCode(); got != c.want || cl.Exit != c.want {
				t.Errorf("the helper exited %d, the client %d; want both %d", got, cl.Exit, c.want)
			}
			if _, err := os.Stat(filepath.Join(reports, "server-term.json")); err != nil {
				t.Errorf("the server never got SIGTERM: %v", err)
			}
			if !gone(srv.Pid) {
				t.Errorf("the server (pid %d) still runs", srv.Pid)
			}
			if _, err := os.Stat(filepath.Dir(strings.TrimPrefix(srv.Listen, "unix://"))); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the socket directory was not removed: %v", err)
			}
		})
	}
}

// waitLine reads r until a line equal to want.
func waitLine(r io.Reader, want string) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if sc.Text() == want {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}
