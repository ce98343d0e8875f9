package pty

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// The tests re-execute the test binary in three roles, chosen by
// environment:
//
//	outer:  the launcher. It is started by a test on a pty the test owns
//	        (its controlling terminal, standing for the user's). On a
//	        terminal it holds the terminal (Attach) and starts the middle
//	        role with the control socket, in a jail when the test wraps it;
//	        otherwise it calls Run on the inner program itself. It reports
//	        what happened.
//	middle: the in-jail helper: Run on the inner program over the control
//	        socket (Serve).
//	inner:  the agent. Serve starts it on a fresh pty; each mode exercises
//	        one behaviour and prints what it observed.
const (
	envRole   = "CCO_PTY_TEST_ROLE"
	envMode   = "CCO_PTY_TEST_MODE"
	envReport = "CCO_PTY_TEST_REPORT"
	envInner  = "CCO_PTY_TEST_INNER"
	envStdout = "CCO_PTY_TEST_STDOUT" // the outer role's stdout goes to this file
	envStderr = "CCO_PTY_TEST_STDERR" // the outer role's stderr goes to this file
	envWrap   = "CCO_PTY_TEST_WRAP"   // the middle role's command before the test binary, separated by 0x1f
)

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "outer":
		outerMain()
	case "middle":
		middleMain()
	case "inner":
		innerMain(os.Getenv(envMode))
	default:
		os.Exit(m.Run())
	}
}

// report is what the outer role tells the test about Run.
type report struct {
	Code     int    `json:"code"`
	Err      string `json:"err"`
	StdinTTY bool   `json:"stdin_tty"`
	// Restored: the terminal's settings after Run equal those before.
	Restored bool `json:"restored"`
}

func outerMain() {
	for fd, env := range map[int]string{1: envStdout, 2: envStderr} {
		if p := os.Getenv(env); p != "" {
			f, err := os.Create(p)
			if err == nil {
				err = unix.Dup3(int(f.Fd()), fd, 0)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "redirecting:", err)
				os.Exit(91)
			}
		}
	}
	before, berr := unix.IoctlGetTermios(0, unix.TCGETS)
	path := os.Args[0]
	if p := os.Getenv(envInner); p != "" {
		path = p
	}
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), envRole+"=inner")
	rep := report{StdinTTY: IsTerminal(os.Stdin)}
	var code int
	var err error
	if IsTerminal(os.Stdin) && IsTerminal(os.Stdout) {
		code, err = launch()
	} else {
		code, err = Run(cmd)
	}
	after, aerr := unix.IoctlGetTermios(0, unix.TCGETS)
	rep.Code = code
	if err != nil {
		rep.Err = err.Error()
	}
	rep.Restored = berr == nil && aerr == nil && *before == *after
	b, _ := json.Marshal(rep)
	if err := os.WriteFile(os.Getenv(envReport), b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "writing the report:", err)
		os.Exit(90)
	}
	os.Exit(code)
}

// launch is what the shadow does on a terminal: the control socket, the
// setup, the user's terminal attached, and the helper (the middle role)
// started with the socket as its descriptor 3 and nothing of the terminal.
func launch() (int, error) {
	setup, err := SetupOf(os.Stdin, !IsTerminal(os.Stderr))
	if err != nil {
		return 126, err
	}
	host, jail, err := NewControl()
	if err != nil {
		return 126, err
	}
	if err := SendSetup(host, setup); err != nil {
		return 126, err
	}
	t, err := Attach(host, os.Stdin, os.Stdout)
	if err != nil {
		return 126, err
	}
	argv := []string{os.Args[0]}
	if w := os.Getenv(envWrap); w != "" {
		argv = append(strings.Split(w, "\x1f"), argv...)
	}
	middle := exec.Command(argv[0], argv[1:]...)
	middleReport := os.Getenv(envReport) + ".middle"
	middle.Env = append(os.Environ(), envRole+"=middle", envReport+"="+middleReport)
	middle.ExtraFiles = []*os.File{jail}
	middle.Stderr = os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	if err := middle.Start(); err != nil {
		return 126, err
	}
	jail.Close()
	go func() {
		for s := range sigs {
			_ = middle.Process.Signal(s)
		}
	}()
	_ = middle.Wait()
	t.Close()
	var r report
	if b, err := os.ReadFile(middleReport); err == nil {
		_ = json.Unmarshal(b, &r)
	}
	if r.Err != "" {
		err = errors.New(r.Err)
	}
	return exitStatus(middle.ProcessState), err
}

// middleMain is the helper in the jail: Run over the control socket.
func middleMain() {
	UseControl(os.NewFile(3, "pty-control"))
	path := os.Args[len(os.Args)-1]
	if p := os.Getenv(envInner); p != "" {
		path = p
	}
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), envRole+"=inner")
	code, err := Run(cmd)
	var r report
	r.Code = code
	if err != nil {
		r.Err = err.Error()
	}
	b, _ := json.Marshal(r)
	_ = os.WriteFile(os.Getenv(envReport), b, 0o644)
	os.Exit(code)
}

func innerMain(mode string) {
	switch mode {
	case "size":
		winch := make(chan os.Signal, 4)
		signal.Notify(winch, unix.SIGWINCH)
		printSize := func() {
			ws, err := unix.IoctlGetWinsize(0, unix.TIOCGWINSZ)
			if err != nil {
				fmt.Println("SIZE error", err)
				return
			}
			fmt.Printf("SIZE %d %d\n", ws.Row, ws.Col)
		}
		printSize()
		quit := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(os.Stdin)
			for sc.Scan() {
				if strings.TrimSpace(sc.Text()) == "q" {
					close(quit)
					return
				}
			}
		}()
		for {
			select {
			case <-winch:
				printSize()
			case <-quit:
				os.Exit(0)
			}
		}
	case "sigint":
		// No handler: ^C kills the process by SIGINT.
		fmt.Println("READY")
		time.Sleep(time.Minute)
		os.Exit(99)
	case "exit7":
		fmt.Println("BYE")
		os.Exit(7)
	case "kill":
		fmt.Println("DYING")
		_ = unix.Kill(os.Getpid(), unix.SIGKILL)
		time.Sleep(time.Minute)
	case "raw":
		// With its own terminal raw, the program sees the bytes that the
		// outer terminal passed on: a carriage return stays 0x0d only
		// when the outer terminal was raw too (cooked, ICRNL makes it 0x0a).
		old, err := term.MakeRaw(0)
		if err != nil {
			fmt.Println("RAW error", err)
			os.Exit(2)
		}
		fmt.Print("READY\r\n")
		b := make([]byte, 1)
		n, _ := os.Stdin.Read(b)
		_ = term.Restore(0, old)
		fmt.Printf("GOT %02x n=%d\n", b[0], n)
		os.Exit(0)
	case "term":
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, unix.SIGTERM, unix.SIGHUP)
		fmt.Println("READY")
		s := <-sigs
		fmt.Println("GOT", s)
		if s == unix.SIGTERM {
			os.Exit(3)
		}
		os.Exit(4)
	case "jobctl":
		jobControl()
	case "suspend":
		// The default for SIGTSTP: ^Z stops the program, as it stops an
		// agent; SIGCONT continues it.
		cont := make(chan os.Signal, 1)
		signal.Notify(cont, unix.SIGCONT)
		fmt.Println("READY")
		<-cont
		fmt.Println("RESUMED")
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Println("ECHO", strings.TrimSpace(line))
		os.Exit(6)
	case "plain":
		fmt.Printf("TTY=%v\n", term.IsTerminal(0))
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Println("ECHO", strings.TrimSpace(line))
		os.Exit(5)
	case "streams":
		fmt.Printf("OUT in=%v out=%v\n", term.IsTerminal(0), term.IsTerminal(1))
		fmt.Fprintf(os.Stderr, "ERR err=%v\n", term.IsTerminal(2))
		os.Exit(0)
	case "sleeper":
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "unknown mode", mode)
	os.Exit(98)
}

// jobControl checks that the program is the session leader and foreground
// process group of a controlling terminal, then runs a job in the
// foreground and waits for ^Z (typed into the outer terminal) to stop it.
func jobControl() {
	pid := os.Getpid()
	sid, _ := unix.Getsid(0)
	fg, fgErr := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	tty, ttyErr := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if ttyErr == nil {
		tty.Close()
	}
	// The helper leads the session; the agent leads the foreground
	// process group of its terminal.
	state := "bad"
	if sid != pid && unix.Getpgrp() == pid && fgErr == nil && fg == pid && ttyErr == nil {
		state = "ok"
	}
	fmt.Printf("SESSION %s sid=%d pid=%d pgrp=%d fg=%d tty=%v\n", state, sid, pid, unix.Getpgrp(), fg, ttyErr)

	signal.Ignore(unix.SIGTTOU) // taking the terminal back from the background
	job := exec.Command(os.Args[0])
	job.Env = append(os.Environ(), envMode+"=sleeper")
	job.Stdin, job.Stdout, job.Stderr = os.Stdin, os.Stdout, os.Stderr
	job.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: 0}
	if err := job.Start(); err != nil {
		fmt.Println("JOB error", err)
		os.Exit(2)
	}
	fmt.Println("FG READY")
	var ws unix.WaitStatus
	if _, err := unix.Wait4(job.Process.Pid, &ws, unix.WUNTRACED, nil); err != nil {
		fmt.Println("WAIT error", err)
		os.Exit(2)
	}
	if ws.Stopped() {
		fmt.Println("STOPPED", int(ws.StopSignal()))
	} else {
		fmt.Println("NOT STOPPED", ws)
	}
	_ = unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, unix.Getpgrp())
	_ = unix.Kill(job.Process.Pid, unix.SIGKILL)
	_, _ = unix.Wait4(job.Process.Pid, &ws, 0, nil)
	os.Exit(0)
}
