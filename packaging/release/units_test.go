package release

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// unitKeys reads a unit file's Key=Value lines by section ("Service.Type").
func unitKeys(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, section := map[string]string{}, ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not Key=Value", path, line)
			}
			out[section+"."+k] = v
		}
	}
	return out
}

// The upgrade units: a oneshot service running exactly the forward-only
// upgrade with a JSON report, and a daily timer with a randomized delay
// that catches up a missed day.
func TestUpgradeUnits(t *testing.T) {
	svc := unitKeys(t, "../systemd/cco-upgrade.service")
	wantKeys(t, "cco-upgrade.service", svc, map[string]string{
		"Service.Type":             "oneshot",
		"Service.ExecStart":        "/usr/bin/cco-install --upgrade all --json",
		"Unit.ConditionPathExists": "/var/lib/cco/receipt.json",
		"Unit.After":               "network-online.target",
	})
	if _, ok := svc["Install.WantedBy"]; ok {
		t.Error("cco-upgrade.service has an [Install] section: only the timer is enabled")
	}
	wantKeys(t, "cco-upgrade.timer", unitKeys(t, "../systemd/cco-upgrade.timer"), map[string]string{
		"Timer.OnCalendar":         "daily",
		"Timer.RandomizedDelaySec": "6h",
		"Timer.Persistent":         "true",
		"Install.WantedBy":         "timers.target",
	})
}

func wantKeys(t *testing.T, unit string, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s %s = %q, want %q", unit, k, got[k], w)
		}
	}
}

// The package ships both units, and nothing that enables them: the timer
// is off until auto_upgrade = true makes cco-install link it.
func TestUnitsShippedDisabled(t *testing.T) {
	m := buildAll(t, "0.2.0", time.Unix(1700000000, 0))
	list := run(t, "dpkg-deb", "--contents", m["deb"].Path)
	for _, u := range []string{"cco-upgrade.service", "cco-upgrade.timer"} {
		if !regexp.MustCompile(`(?m)^-rw-r--r-- root/root .* \./usr/lib/systemd/system/` + regexp.QuoteMeta(u) + `$`).MatchString(list) {
			t.Errorf("the deb does not ship /usr/lib/systemd/system/%s 0644:\n%s", u, list)
		}
	}
	if strings.Contains(list, "./etc/systemd") || strings.Contains(list, ".wants/") {
		t.Errorf("the deb enables a unit:\n%s", list)
	}
	ctl := t.TempDir()
	run(t, "dpkg-deb", "--control", m["deb"].Path, ctl)
	for _, s := range []string{"postinst", "prerm"} {
		b, _ := os.ReadFile(ctl + "/" + s)
		if strings.Contains(string(b), "systemctl enable") || strings.Contains(string(b), "deb-systemd-helper enable") {
			t.Errorf("%s enables a unit", s)
		}
	}
}
