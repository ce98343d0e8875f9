package main

import (
	"testing"

	"github.com/cco-dev/cco/internal/deptest"
)

// The proxy parses what the jail sends: it links its HTTP stack and
// nothing of the installer's. It reads the agent table, whose profiles
// carry the vendors' endpoints of the default allowlist.
func TestDeps(t *testing.T) {
	deptest.Check(t, "github.com/cco-dev/cco/cmd/egress-proxy", map[string]string{
		"github.com/cco-dev/cco/provision/...":   "the installer's provisioning has no place in the session's proxy",
		"github.com/cco-dev/cco/vendorfetch/...": "vendor downloads are the installer's",
		"github.com/cco-dev/cco/cmd/cco-install": "the installer's own package",
	})
}
