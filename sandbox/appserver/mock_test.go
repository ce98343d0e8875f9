package appserver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The test binary, re-executed, is a mock codex (CCO_MOCK_CODEX=1) that
// speaks a one-line protocol over the app-server socket, or a helper
// (CCO_APPSERVER_HELPER=1) that calls Run as the in-jail helper does, for
// the tests that send it signals.
const (
	envMock       = "CCO_MOCK_CODEX"
	envHelper     = "CCO_APPSERVER_HELPER"
	envReports    = "CCO_MOCK_REPORTS" // directory for the mock's reports
	envServerMode = "CCO_MOCK_SERVER"  // "", "never", "exit", "ignore-term"
	envClientMode = "CCO_MOCK_CLIENT"  // "" (exit CCO_MOCK_EXIT), "hang"
	envClientExit = "CCO_MOCK_EXIT"
)

// serverReport is what the mock server records about how it was started.
type serverReport struct {
	Args    []string `json:"args"`
	Cwd     string   `json:"cwd"`
	Pid     int      `json:"pid"`
	Listen  string   `json:"listen"`
	DirMode uint32   `json:"dir_mode"`
}

func mockMain(args []string) {
	for _, a := range args {
		if a == "app-server" {
			mockServer(args)
			return
		}
	}
	mockClient(args)
}

func writeReport(name string, v any) {
	b, _ := json.Marshal(v)
	if err := os.WriteFile(filepath.Join(os.Getenv(envReports), name), b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "mock: writing report:", err)
		os.Exit(90)
	}
}

func mockServer(args []string) {
	var listen string
	var flags []string
	for i, a := range args {
		if a == "--listen" && i+1 < len(args) {
			listen = args[i+1]
		}
		if a == "app-server" {
			flags = args[:i]
		}
	}
	sock := strings.TrimPrefix(listen, "unix://")
	cwd, _ := os.Getwd()
	rep := serverReport{Args: args, Cwd: cwd, Pid: os.Getpid(), Listen: listen}
	if st, err := os.Stat(filepath.Dir(sock)); err == nil {
		rep.DirMode = uint32(st.Mode().Perm())
	}
	writeReport("server.json", rep)

	switch os.Getenv(envServerMode) {
	case "exit":
		fmt.Fprintln(os.Stderr, "mock-server: error loading config.toml: bad key")
		os.Exit(3)
	case "never":
		fmt.Fprintln(os.Stderr, "mock-server: waiting for a lock that never comes")
		time.Sleep(time.Minute)
		os.Exit(0)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
	default:
		terms := make(chan os.Signal, 1)
		signal.Notify(terms, syscall.SIGTERM)
		go func() {
			<-terms
			writeReport("server-term.json", true)
			os.Exit(0)
		}()
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mock-server:", err)
		os.Exit(4)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(5)
		}
		go func() {
			line, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Fprintf(c, "hello %s from cwd=%s flags=%s\n", strings.TrimSpace(line), cwd, strings.Join(flags, " "))
			// Keep the connection: the client notices when the server
			// goes away.
		}()
	}
}

// clientReport is what the mock client records.
type clientReport struct {
	Args  []string `json:"args"`
	Reply string   `json:"reply"`
	Exit  int      `json:"exit"`
}

func mockClient(args []string) {
	rep := clientReport{Args: args}
	if len(args) < 2 || args[0] != "--remote" {
		fmt.Fprintln(os.Stderr, "mock-client: no --remote first:", args)
		os.Exit(80)
	}
	c, err := net.Dial("unix", strings.TrimPrefix(args[1], "unix://"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "mock-client:", err)
		os.Exit(81)
	}
	fmt.Fprintln(c, "client")
	r := bufio.NewReader(c)
	rep.Reply, _ = r.ReadString('\n')
	rep.Reply = strings.TrimSpace(rep.Reply)
	fmt.Println("REPLY", rep.Reply)
	exit := func(code int) {
		rep.Exit = code
		writeReport("client.json", rep)
		os.Exit(code)
	}
	// Dying of SIGINT, as an unprepared program does, still reports.
	ints := make(chan os.Signal, 1)
	signal.Notify(ints, syscall.SIGINT)
	go func() {
		<-ints
		rep.Exit = 128 + 2
		writeReport("client.json", rep)
		signal.Reset(syscall.SIGINT)
		_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
	}()
	switch os.Getenv(envClientMode) {
	case "hang":
		terms := make(chan os.Signal, 1)
		signal.Notify(terms, syscall.SIGTERM, syscall.SIGHUP)
		gone := make(chan struct{})
		go func() {
			_, _ = r.ReadString('\n') // EOF: the server went away
			close(gone)
		}()
		fmt.Println("READY")
		select {
		case s := <-terms:
			exit(60 + int(s.(syscall.Signal)))
		case <-gone:
			// A signal sent along with the server's stop wins.
			select {
			case s := <-terms:
				exit(60 + int(s.(syscall.Signal)))
			case <-time.After(300 * time.Millisecond):
				exit(9)
			}
		}
	default:
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Println("STDIN", strings.TrimSpace(line))
		code := 0
		fmt.Sscan(os.Getenv(envClientExit), &code)
		exit(code)
	}
}
