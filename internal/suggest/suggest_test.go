package suggest

import "testing"

func TestClosest(t *testing.T) {
	keys := []string{"egress", "egress_allow", "allow_host", "pass_env"}
	for in, want := range map[string]string{
		"egress_alow": "egress_allow",
		"Pass_Env":    "pass_env",
		"allowhost":   "allow_host",
		"zzzzzzzzzzz": "",
	} {
		if got := Closest(in, keys); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
}
