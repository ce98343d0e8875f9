package main

import (
	"testing"

	"github.com/cco-dev/cco/internal/deptest"
)

// Every launch waits for the shadow's start: it links no HTTP stack and
// none of the installer's packages.
func TestDeps(t *testing.T) {
	deptest.Check(t, "github.com/cco-dev/cco/cmd/shadow", map[string]string{
		"net/http":                               "an HTTP stack's init on every launch; the proxy runs apart (cmd/egress-proxy)",
		"github.com/cco-dev/cco/provision/...":   "the installer's provisioning has no place on the launch path",
		"github.com/cco-dev/cco/vendorfetch/...": "vendor downloads are the installer's",
		"github.com/cco-dev/cco/cmd/cco-install": "the installer's own package",
		"github.com/cco-dev/cco/managed/...":     "the managed policy is written by the installer",
		"github.com/cco-dev/cco/takeover/...":    "taking over vendor installs is the installer's",
	})
}
