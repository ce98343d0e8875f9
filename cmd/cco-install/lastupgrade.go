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
}

// recordUpgrade writes the outcome of an --upgrade run. A write that fails
// costs only the record: the run's own report says what happened.
func recordUpgrade(root *provision.Root, agents []string, rep *provision.Report) {
	lu := lastUpgrade{Time: time.Now().UTC().Format(time.RFC3339), Agents: agents, OK: rep.Failed == 0 && !rep.Interrupted}
	for _, s := range rep.Steps {
		if s.Status == provision.StatusFailed {
			lu.Failed = append(lu.Failed, s.ID+": "+s.Detail)
		}
	}
	if rep.Interrupted {
		lu.Failed = append(lu.Failed, "interrupted")
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
// timer meant it to be.
func upgradeFinding(root provision.FileReader) *provision.Finding {
	b, err := root.ReadFile(lastUpgradePath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var lu lastUpgrade
	if err != nil || json.Unmarshal(b, &lu) != nil {
		return &provision.Finding{ID: "upgrade", Path: lastUpgradePath, Detail: "the record of the last upgrade cannot be read",
			Fix: "run `sudo cco-install --upgrade all` (it writes the record anew)"}
	}
	if lu.OK {
		return nil
	}
	return &provision.Finding{ID: "upgrade", Path: lastUpgradePath,
		Detail: "the last upgrade (" + strings.Join(lu.Agents, ", ") + ", " + lu.Time + ") failed; the installed versions stayed: " + strings.Join(lu.Failed, "; "),
		Fix:    "run `sudo cco-install --upgrade " + strings.Join(lu.Agents, ",") + "` and fix what it names (journalctl -u cco-upgrade.service has the scheduled run's report)"}
}
