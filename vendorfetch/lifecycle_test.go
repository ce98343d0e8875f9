package vendorfetch

import "testing"

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"2.1.330", "2.1.328", 1},
		{"2.1.328", "2.1.330", -1},
		{"0.170.0", "0.99.9", 1},
		{"1.10", "1.9", 1},
		{"1.2", "1.2.0", 0},
		{"1.2.0-beta.1", "1.2.0", -1},
		{"1.2.0", "1.2.0-beta.1", 1},
		{"1.2.0-alpha", "1.2.0-beta", -1},
		{"3.0.0", "3.0.0", 0},
		{"1.2.0-beta.2", "1.2.0-beta.10", -1},
		{"0.62.0-preview.1", "0.61.0", 1},
		{"0.62.0-nightly.20261201.abc", "0.62.0-preview.1", -1},
		{"2.1.88", "2.1.89", -1},
		{"2.0.999", "2.1.89", -1},
		{"2.1.9", "2.1.89", -1},
		{"1.2.3.4", "1.2.3", -1}, // not semver: before every version that is
		{"1.2.3", "1.2.3.4", 1},
	} {
		if got := compareVersions(c.a, c.b); got != c.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestForwardOnly(t *testing.T) {
	st := &agentState{Version: "0.170.0"}
	if err := forwardOnly(Config{}, AgentCodex, st, "", "0.169.0"); err == nil {
		t.Fatal("a channel naming an older release must be refused")
	}
	if err := forwardOnly(Config{AllowDowngrade: true}, AgentCodex, st, "", "0.169.0"); err != nil {
		t.Fatalf("--allow-downgrade: %v", err)
	}
	if err := forwardOnly(Config{}, AgentCodex, st, "0.169.0", "0.169.0"); err != nil {
		t.Fatalf("a pin is the operator's choice: %v", err)
	}
	if err := forwardOnly(Config{}, AgentCodex, st, "", "0.171.0"); err != nil {
		t.Fatalf("forward: %v", err)
	}
	if err := forwardOnly(Config{}, AgentCodex, nil, "", "0.1.0"); err != nil {
		t.Fatalf("not installed: %v", err)
	}
}
