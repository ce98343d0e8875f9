package tally

import (
	"strings"
	"testing"
)

func TestTallyAndLine(t *testing.T) {
	var tl Tally
	for range 3 {
		tl.Add("api.example.com:443", Allowed)
	}
	tl.Add("cdn.example.com:443", Allowed)
	tl.Add("10.0.0.1:22", Refused)
	tl.Add("evil.example:443", Refused)
	tl.Add("evil.example:443", Refused)
	s := tl.Summary()
	if s.Allowed.Requests != 4 || s.Allowed.Destinations != 2 || s.Refused.Requests != 3 || s.Refused.Destinations != 2 || s.Failed.Requests != 0 {
		t.Fatalf("summary %+v", s)
	}
	back, err := Decode(s.Encode())
	if err != nil {
		t.Fatal(err)
	}
	got := back.Line("/home/u/.local/state/cco/egress.log")
	want := "cco: egress this session: allowed 4 to 2 (api.example.com:443 x3, cdn.example.com:443); refused 3 to 2 (evil.example:443 x2, 10.0.0.1:22); details: /home/u/.local/state/cco/egress.log"
	if got != want {
		t.Errorf("line\n got %s\nwant %s", got, want)
	}
	tl.Add("down.example:443", Failed)
	if l := tl.Summary().Line(""); !strings.HasSuffix(l, "; failed 1 to 1 (down.example:443)") {
		t.Errorf("with a failure: %s", l)
	}
	if !(Summary{}).Empty() || s.Empty() {
		t.Error("Empty is wrong")
	}
	if _, err := Decode("{"); err == nil {
		t.Error("a broken summary decoded")
	}
}

// TestTallyBounded: a flood of distinct destinations is counted, named
// up to Shown, and held in bounded memory.
func TestTallyBounded(t *testing.T) {
	var tl Tally
	for i := range maxDests + 100 {
		tl.Add(strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("y", i/26)+":443", Refused)
	}
	s := tl.Summary()
	if s.Refused.Requests != maxDests+100 || s.Refused.Destinations != maxDests+1 || len(s.Refused.Top) != Shown {
		t.Errorf("refused %d to %d, %d named", s.Refused.Requests, s.Refused.Destinations, len(s.Refused.Top))
	}
	if len(tl.dests[Refused]) > maxDests {
		t.Errorf("%d destinations kept", len(tl.dests[Refused]))
	}
	line := s.Line("")
	if !strings.Contains(line, "more)") || len(line) > 1000 {
		t.Errorf("line of %d bytes: %s", len(line), line)
	}
}
