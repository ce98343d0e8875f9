package main

import (
	"strconv"

	"github.com/cco-dev/cco/autoupgrade"
	"github.com/cco-dev/cco/provision"
)

// appendAutoUpgrade adds the step that owns cco-upgrade.timer's enablement,
// from the auto_upgrade key: when it is true, or when it is false and the
// receipt still records the link (to remove it). A machine that never
// enabled it has no step for it.
func appendAutoUpgrade(steps []provision.Step, run *provision.View, cfg *Config) ([]provision.Step, error) {
	on, err := strconv.ParseBool(cfg.String("auto_upgrade"))
	if err != nil {
		cfg.bad("auto_upgrade", cfg.String("auto_upgrade"), "want true or false")
		return nil, cfg.Err()
	}
	if !on && run.Receipt.Paths[autoupgrade.WantsLink] == nil {
		return steps, nil
	}
	return append(steps, &autoupgrade.Step{Enabled: on}), nil
}
