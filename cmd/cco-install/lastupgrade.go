package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"time"

	"github.com/cco-dev/cco/provision"
)

// lastUpgradePath records how the last --upgrade run ended, so that a
// scheduled upgrade that failed (cco-upgrade.service, no one watching) shows
// in status.
const lastUpgradePath = provision.StateDir + "/last-upgrade.json"

// lastUpgrade is that record.
type lastUpgrade struct {
	Time   string   `json:"time"`
	Agents []string `json:"agents"`
	OK     bool     `json:"ok"`
	Failed []string `json:"failed,omitempty"`
	// Interrupted: a signal (an operator's ^C, systemd stopping the unit)
	// ended the run. That is no failure of the host's: status notes it.
	Interrupted bool `json:"interrupted,omitempty"`
}

// recordUpgrade writes the outcome of an --upgrade run. A write that fails
// costs only the record: the run's own report says what happened.
func recordUpgrade(root *provision.Root, agents []string, rep *provision.Report) {
	lu := lastUpgrade{Time: time.Now().UTC().Format(time.RFC3339), Agents: agents, OK: rep.Failed == 0 && !rep.Interrupted, Interrupted: rep.Interrupted}
	// The step in flight fails on the signal's cancelled context: that is
	// the interruption, not a failure.
	for _, s := range rep.Steps {
		if s.Status == provision.StatusFailed && !rep.Interrupted {
			lu.Failed = append(lu.Failed, s.ID+": "+s.Detail)
		}
	}
	b, err := json.Marshal(&lu)
	if err != nil {
		return
	}
	root.WriteFile(lastUpgradePath, bytes.NewReader(append(b, '\n')), 0o644, provision.SystemUID(), provision.SystemGID())
}

// upgradeFinding is status's finding for a last upgrade that failed, or
// nil. The current version stays in place after such a run (upgrades are
// forward-only and atomic), so the host still works, but is not where its
// timer meant it to be. An upgrade that a signal stopped is no finding:
// note says so in one line, and the installed state is checked as always.
func upgradeFinding(root provision.FileReader) (f *provision.Finding, note string) {
	b, err := root.ReadFile(lastUpgradePath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ""
	}
	var lu lastUpgrade
	if err != nil || json.Unmarshal(b, &lu) != nil {
		return &provision.Finding{ID: "upgrade", Path: lastUpgradePath, Detail: "the record of the last upgrade cannot be read",
			Fix: "run `sudo cco-install --upgrade all` (it writes the record anew)"}, ""
	}
	again := "sudo cco-install --upgrade " + strings.Join(lu.Agents, ",")
	switch {
	case lu.OK:
		return nil, ""
	case lu.Interrupted:
		return nil, "the last upgrade (" + strings.Join(lu.Agents, ", ") + ", " + lu.Time + ") was interrupted; the installed versions stayed (`" + again + "` runs it again)"
	}
	return &provision.Finding{ID: "upgrade", Path: lastUpgradePath,
		Detail: "the last upgrade (" + strings.Join(lu.Agents, ", ") + ", " + lu.Time + ") failed; the installed versions stayed: " + strings.Join(lu.Failed, "; "),
		Fix:    "run `" + again + "` and fix what it names (journalctl -u cco-upgrade.service has the scheduled run's report)"}, ""
}
