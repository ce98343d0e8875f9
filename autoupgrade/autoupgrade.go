// Package autoupgrade is the step that turns cco's scheduled upgrades on and
// off. The package ships cco-upgrade.service and cco-upgrade.timer disabled;
// auto_upgrade = true in install.toml enables the timer the way
// `systemctl enable` does, with the symlink in timers.target.wants, and
// records that link in the receipt like every other owned path. So
// `cco-install status` sees it, a later auto_upgrade = false removes it, and
// --uninstall removes it with the rest.
package autoupgrade

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"github.com/cco-dev/cco/internal/sysbin"
	"github.com/cco-dev/cco/provision"
)

// Where the package puts the units, and where enabling links the timer.
const (
	UnitDir     = "/usr/lib/systemd/system"
	TimerName   = "cco-upgrade.timer"
	ServiceName = "cco-upgrade.service"
	TimerUnit   = UnitDir + "/" + TimerName
	WantsDir    = "/etc/systemd/system/timers.target.wants"
	WantsLink   = WantsDir + "/" + TimerName
)

// StepID is the step's id in reports and the receipt.
const StepID = "autoupgrade.timer"

// Step enables or disables the timer.
type Step struct {
	Enabled bool
}

func (s *Step) ID() string { return StepID }
func (s *Step) Name() string {
	if s.Enabled {
		return "enable the daily upgrade timer (" + TimerName + ")"
	}
	return "keep the daily upgrade timer (" + TimerName + ") disabled"
}

// action is what Check found for Apply to do.
type action int

const (
	enable action = iota
	adopt
	disable
)

func (s *Step) Check(run *provision.View) (provision.Check, error) {
	c := provision.Check{Paths: []string{WantsLink}}
	owned := run.Receipt.Paths[WantsLink]
	fi, err := run.Root.Lstat(WantsLink)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return c, err
	}
	exists := err == nil
	target := ""
	if exists && fi.Mode()&fs.ModeSymlink != 0 {
		if target, err = run.Root.Readlink(WantsLink); err != nil {
			return c, err
		}
	}
	if !s.Enabled {
		switch {
		case owned != nil && exists && target == owned.Target:
			c.State, c.Detail, c.Data = provision.ToDo, "disable "+TimerName+": remove "+WantsLink, disable
		case owned != nil:
			// Gone or replaced behind cco's back: what stands there now is
			// not cco's to remove; only the record goes.
			c.State, c.Detail, c.Data = provision.ToDo, "forget "+WantsLink+" (no longer cco's link)", disable
		default:
			c.State, c.Detail = provision.Done, TimerName+" is disabled (auto_upgrade = false)"
		}
		return c, nil
	}
	if _, err := run.Root.Lstat(TimerUnit); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return c, fmt.Errorf("auto_upgrade = true needs %s, which the cco package installs: install the deb or rpm (or set auto_upgrade = false)", TimerUnit)
		}
		return c, err
	}
	switch {
	case exists && target == TimerUnit && owned != nil && owned.Target == TimerUnit:
		c.State, c.Detail = provision.Done, TimerName+" is enabled"
	case exists && target == TimerUnit:
		c.State, c.Detail, c.Data = provision.ToDo, "take over the enabled "+TimerName+" ("+WantsLink+")", adopt
	case exists:
		what := "not a link to " + TimerUnit
		if target != "" {
			what = "a link to " + target
		}
		c.State, c.Detail = provision.Conflict, WantsLink+" is "+what+": left as it is"
		c.Fix = "remove it (systemctl disable " + TimerName + "), then run cco-install again"
	default:
		c.State, c.Detail, c.Data = provision.ToDo, "enable "+TimerName+": link "+WantsLink+" -> "+TimerUnit, enable
	}
	return c, nil
}

func (s *Step) Apply(run *provision.Run, c provision.Check) (string, error) {
	switch c.Data {
	case disable:
		e := run.Receipt.Paths[WantsLink]
		msg := "forgot " + WantsLink
		if l, err := run.Root.Readlink(WantsLink); err == nil && l == e.Target {
			if err := run.Root.Remove(WantsLink); err != nil {
				return "", fmt.Errorf("removing %s: %w", WantsLink, err)
			}
			msg = "disabled " + TimerName + " (removed " + WantsLink + ")"
		}
		delete(run.Receipt.Paths, WantsLink)
		systemctl(run, "stop", TimerName)
		return msg, nil
	case enable:
		if err := run.MkdirAll(path.Dir(WantsLink), 0o755, StepID); err != nil {
			return "", err
		}
		if err := run.Root.Symlink(TimerUnit, WantsLink); err != nil {
			return "", fmt.Errorf("linking %s: %w", WantsLink, err)
		}
	}
	if err := run.Record(WantsLink, provision.KindLink, "", StepID); err != nil {
		return "", err
	}
	systemctl(run, "start", TimerName)
	return "enabled " + TimerName + " (" + WantsLink + ")", nil
}

// systemctl tells a running systemd about the change, so the timer starts or
// stops now rather than at the next boot. Only on the host itself (not a
// --root, not an image build), and only where systemd is the init; the
// link is the state either way, so a failure here is a warning.
func systemctl(run *provision.Run, verb, unit string) {
	if !run.Root.IsHost() {
		return
	}
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return
	}
	for _, args := range [][]string{{"daemon-reload"}, {verb, unit}} {
		cmd, err := sysbin.Command(run.Ctx, "systemctl", args...)
		var out []byte
		if err == nil {
			out, err = cmd.CombinedOutput()
		}
		if err != nil && args[0] == "daemon-reload" {
			run.Logf("warning: systemctl daemon-reload: %v: %s", err, out)
			return
		}
		if err != nil {
			run.Logf("warning: systemctl %s %s: %v: %s (the change takes effect at the next boot)", verb, unit, err, out)
		}
	}
}
