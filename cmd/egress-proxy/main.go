// Command egress-proxy is the host side of a jail's network policy, in a
// process of its own: the shadow starts it, as the invoking user, at
// /usr/libexec/cco/egress-proxy, when the first connection of a session
// whose egress is "public" or "allowlist" arrives:
//
//	egress-proxy SESSION
//
// with the listening unix socket on descriptor 3, the audit log's lock and
// file on 4 and 5, the policy on standard input (held open for the session:
// its end stops the proxy) and "ready" or "error: ..." on standard output
// (package egress, ServeProcess, says the whole protocol). It parses what
// the jail sends, so it runs apart from the shadow; and the shadow, which
// every launch waits for, does not link an HTTP stack.
//
//	egress-proxy aws-credentials
//
// answers the shadow's other question that needs an HTTP stack, for a
// launch whose agent's Bedrock switch is on: the user's AWS profile's
// credentials, resolved by the AWS SDK's loader, as JSON on standard
// output (package cloudcreds, Answer).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cco-dev/cco/sandbox/cloudcreds"
	"github.com/cco-dev/cco/sandbox/cloudcreds/awsload"
	"github.com/cco-dev/cco/sandbox/egress"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == cloudcreds.AWSMode {
		// The shadow's question for a Bedrock launch: the user's AWS
		// profile's credentials, by the SDK's loader (package awsload).
		os.Exit(awsload.Serve(os.Stdout, cloudcreds.ResolveTimeout))
	}
	if len(os.Args) != 2 || os.Args[1] == "" {
		fmt.Fprintln(os.Stderr, "cco egress-proxy: usage: egress-proxy SESSION (the shadow starts it, with the listening socket on descriptor 3, the audit log on 4 and 5 and the policy on standard input)")
		os.Exit(2)
	}
	// The proxy is in the shadow's process group: a ^C or a hang-up for the
	// terminal's jobs must not end it under a running session (the shadow
	// decides what the agent gets). It stops when its input ends.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGTERM)
	err := egress.ServeProcess(os.Args[1], os.Stdin, os.Stdout,
		egress.Inherited())
	if err != nil {
		// The shadow reads the reason here and says it; run by hand,
		// standard output is the terminal.
		fmt.Fprintln(os.Stdout, egress.ErrorPrefix+err.Error())
		os.Exit(1)
	}
}
