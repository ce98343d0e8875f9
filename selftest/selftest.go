// Package selftest is the battery `cco-install verify` runs in a real jail:
// the request the verifier hands the probe, the checks the probe makes from
// inside, and the report it prints. The probe is the installed helper
// (`sandbox-helper selftest`), which the shadow starts in place of the vendor
// binary when CCO_SELFTEST=1 is set; every other part of the launch is the
// one the agent gets.
//
// The probe only reports what it observes; the verdict, and the checks that
// need the host (the guard outside the jail, the sentinels' cleanup), are the
// verifier's (package verify).
package selftest

import (
	"encoding/json"
	"fmt"
)

// Env is the variable that makes the shadow start the probe instead of the
// vendor binary. Its value must be "1".
const Env = "CCO_SELFTEST"

// Schema is the version of Request and Report.
const Schema = 1

// Request is what the verifier asks the probe to check. It travels as one
// JSON argument, since the jail passes no variable it does not own.
type Request struct {
	Schema int    `json:"schema"`
	Agent  string `json:"agent"`
	// Nonce is echoed in the report: output without it did not come from
	// this run's probe.
	Nonce string `json:"nonce"`
	// Secrets are host files holding Nonce that the jail must not show:
	// id -> path.
	Secrets map[string]string `json:"secrets"`
	// HiddenDirs are directories whose entries the jail must not list
	// (other users' homes): id -> path.
	HiddenDirs map[string]string `json:"hidden_dirs,omitempty"`
	// Workspace must be writable; ReadOnly are directories where creating a
	// file must fail.
	Workspace string   `json:"workspace"`
	ReadOnly  []string `json:"read_only"`
	// UnixSocket is a host listener's path, Abstract a host listener's
	// abstract name (without the leading NUL): neither may answer.
	UnixSocket string `json:"unix_socket"`
	Abstract   string `json:"abstract"`
	// Refused is a host loopback address (host:port) of a sink the verifier
	// owns, which the egress policy must refuse; Allowed, when set, one it
	// must let through (the verifier opened it for this run).
	Refused string `json:"refused"`
	Allowed string `json:"allowed,omitempty"`
	// GateScript, when set, is the agent's prompt gate (the jail shows the
	// host's system tree as it is): the probe runs it as the agent would,
	// and inside it must let the prompt through.
	GateScript string `json:"gate_script,omitempty"`
}

// Check is one check's verdict and its evidence in one line.
type Check struct {
	ID     string `json:"id"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Fix is what clears a failed check.
	Fix string `json:"fix,omitempty"`
}

// Report is what the probe prints, one JSON document on its standard
// output.
type Report struct {
	Schema int     `json:"schema"`
	Nonce  string  `json:"nonce"`
	Checks []Check `json:"checks"`
	// Engine and Layers are what the jail's marker and the kernel say is in
	// force.
	Engine string   `json:"engine"`
	Layers []string `json:"layers"`
	Kernel string   `json:"kernel"`
}

// ParseRequest reads the probe's argument.
func ParseRequest(arg string) (*Request, error) {
	var r Request
	if err := json.Unmarshal([]byte(arg), &r); err != nil {
		return nil, fmt.Errorf("the selftest request is not JSON: %w", err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("the selftest request has schema %d, this probe speaks %d (fix: sudo cco-install, so the verifier and the helper are one version)", r.Schema, Schema)
	}
	if r.Nonce == "" {
		return nil, fmt.Errorf("the selftest request has no nonce")
	}
	return &r, nil
}

// ParseReport reads the probe's output; nonce must be the request's.
func ParseReport(out []byte, nonce string) (*Report, error) {
	var r Report
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("the shadow did not print cco's probe report: %w", err)
	}
	if r.Nonce != nonce {
		return nil, fmt.Errorf("the report's nonce is not this run's: it did not come from cco's probe")
	}
	return &r, nil
}
