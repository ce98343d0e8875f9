package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdMirror is the testscript command "mirror": a down mirror, through the
// injected dialer (CCO_TEST_DIAL) that records every dial in $WORK/dials.
//
//	mirror refuse            every connection is refused
//	mirror status CODE [RA]  a loopback server answers every request with
//	                         CODE (and Retry-After: RA)
//	mirror dials N           N dials were made since the last check
func cmdMirror(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: mirror refuse | status CODE [RETRY-AFTER] | dials N")
	}
	log := ts.MkAbs("dials")
	ts.Setenv("CCO_TEST_DIAL_LOG", log)
	switch args[0] {
	case "refuse":
		ts.Setenv("CCO_TEST_DIAL", "refuse")
	case "status":
		code, err := strconv.Atoi(args[1])
		ts.Check(err)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if len(args) > 2 {
				w.Header().Set("Retry-After", args[2])
			}
			w.WriteHeader(code)
		}))
		ts.Defer(srv.Close)
		ts.Setenv("CCO_TEST_DIAL", srv.Listener.Addr().String())
	case "dials":
		b, _ := os.ReadFile(log)
		os.Remove(log)
		got := strings.Count(string(b), "\n")
		if want, _ := strconv.Atoi(args[1]); (got == want) == neg {
			ts.Fatalf("%d dials, want %s%d:\n%s", got, map[bool]string{true: "not "}[neg], want, b)
		}
		fmt.Fprint(ts.Stdout(), string(b))
	default:
		ts.Fatalf("mirror: unknown %q", args[0])
	}
}
