package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cco-dev/cco/provision/provisiontest/treehash"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"cco-install": func() {
			// The crash-safety tests kill the installer right after a step.
			if id := os.Getenv("CCO_TEST_KILL_AFTER"); id != "" {
				afterStep = func(step string) {
					if step == id {
						syscall.Kill(os.Getpid(), syscall.SIGKILL)
					}
				}
			}
			// The signal tests stop the installer in a read that no
			// context reaches (a FIFO no one writes), holding the lock.
			if spec := os.Getenv("CCO_TEST_BLOCK_AFTER"); spec != "" {
				id, fifo, _ := strings.Cut(spec, ":")
				afterStep = func(step string) {
					if step == id {
						os.WriteFile(fifo+".blocked", nil, 0o644)
						os.Open(fifo)
					}
				}
			}
			if d := os.Getenv("CCO_TEST_DIAL"); d != "" {
				httpClient = testDialer(d, os.Getenv("CCO_TEST_DIAL_LOG"))
			}
			os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
	})
}

// testDialer is the vendors' client with an injected dialer: every dial
// is recorded (one line, the address asked for, in logFile) and then
// refused ("refuse": a mirror that is down) or made to addr, a loopback
// test server, whatever host was asked for. No packet leaves loopback.
func testDialer(addr, logFile string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, asked string) (net.Conn, error) {
		if f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			fmt.Fprintln(f, asked)
			f.Close()
		}
		if addr == "refuse" {
			return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}}
}

// TestScripts runs the CLI scenarios in testdata/script: the closest thing to
// an operator at a terminal.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			// The shadow and the egress proxy under test are any files:
			// their bytes are what is copied.
			shadow := filepath.Join(env.WorkDir, "shadow-bin")
			if err := os.WriteFile(shadow, []byte("#!/bin/sh\necho shadow\n"), 0o755); err != nil {
				return err
			}
			env.Setenv("CCO_SHADOW_PATH", shadow)
			proxy := filepath.Join(env.WorkDir, "egress-proxy-bin")
			if err := os.WriteFile(proxy, fakeEgressProxy, 0o755); err != nil {
				return err
			}
			env.Setenv("CCO_EGRESS_PROXY_PATH", proxy)
			// The test machine may carry container markers (/.dockerenv):
			// scenarios choose image mode explicitly.
			env.Setenv("CCO_IMAGE", "no")
			// No scenario reaches a vendor: those that fetch serve a store
			// from httptest and set the agents themselves.
			env.Setenv("CCO_AGENTS", "")
			env.Values[storeKey{}] = new(storeBox)
			env.Values[npmKey{}] = &npmBox{t: t}
			env.Setenv("ROOT", filepath.Join(env.WorkDir, "root"))
			return os.MkdirAll(filepath.Join(env.WorkDir, "root"), 0o755)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"treehash":    cmdTreehash,
			"jsonfield":   cmdJSONField,
			"vendorstore": cmdVendorStore,
			"npmregistry": cmdNpmRegistry,
			"envsubst":    cmdEnvsubst,
			"mirror":      cmdMirror,
			"shadowfix":   cmdShadowFix,
			"flipbyte": func(ts *testscript.TestScript, neg bool, args []string) {
				b := []byte(ts.ReadFile(args[0]))
				b[len(b)/2] ^= 1
				ts.Check(os.WriteFile(ts.MkAbs(args[1]), b, 0o644))
			},
		},
	})
}

// treehash DIR prints one hash of every path, type, mode, owner, size, link
// target, content and mtime below DIR: equal hashes mean a byte-identical tree.
func cmdTreehash(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: treehash DIR")
	}
	h, err := treehash.HashDir(ts.MkAbs(args[0]))
	ts.Check(err)
	fmt.Fprintln(ts.Stdout(), h)
}

// jsonfield FILE KEY WANT checks a top-level field of a JSON document.
func cmdJSONField(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: jsonfield FILE KEY WANT")
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(ts.ReadFile(args[0])), &doc); err != nil {
		ts.Fatalf("%s is not one JSON document: %v", args[0], err)
	}
	got := fmt.Sprint(doc[args[1]])
	if (got == args[2]) == neg {
		ts.Fatalf("%s: %s = %s, want %s%s", args[0], args[1], got, map[bool]string{true: "not "}[neg], args[2])
	}
}
