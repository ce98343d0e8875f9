package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
pkg: github.com/cco-dev/cco/provision
BenchmarkNoopRerun/1MB-2         	       3	     95495 ns/op	       889.7 read-B/op
BenchmarkNoopRerun/1MB-rehash-2  	       3	    706047 ns/op	   1048613 read-B/op
PASS
pkg: github.com/cco-dev/cco/sandbox/egress
BenchmarkEgressVsRelay-2   1   5000 ns/op   100 direct-MB/s   90 relay-MB/s   88 egress-MB/s   1.02 egress/relay
pkg: github.com/cco-dev/cco/guard
BenchmarkGate-2   10   100 ns/op   3 gate-ms/op   2 baseline-ms/op   1 overhead-ms/op
BenchmarkGate logs something here
pkg: github.com/cco-dev/cco/x
BenchmarkNew-2   10   42 ns/op
BenchmarkSub/cco-2   10   30 ns/op
BenchmarkSub/baseline-2   10   10 ns/op
BenchmarkTp/direct-2   10   10 ns/op
BenchmarkTp/relay-2   10   20 ns/op
BenchmarkGD/baseline-read-2   10   4 ns/op
BenchmarkGD/allows-2   10   2 ns/op
`

func TestRows(t *testing.T) {
	res, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 11 {
		t.Fatalf("parsed %d results: %+v", len(res), res)
	}
	got := map[string]Row{}
	for _, r := range Rows(res) {
		got[r.Bench+" "+r.Measure] = r
	}
	for k, want := range map[string]float64{
		"BenchmarkNoopRerun/1MB vs 1MB-rehash read-B/op": 889.7 / 1048613,
		"BenchmarkNoopRerun/1MB vs 1MB-rehash ns/op":     95495.0 / 706047,
		"BenchmarkEgressVsRelay egress/relay":            1.02,
		"BenchmarkGate gate-ms/op":                       1.5,
		"BenchmarkSub/cco vs baseline ns/op":             3,
		"BenchmarkTp/relay vs direct ns/op":              2,
		"BenchmarkGD/allows vs baseline-read ns/op":      0.5,
	} {
		r, ok := got[k]
		if !ok {
			t.Errorf("no row %q in %v", k, got)
			continue
		}
		if d := r.Ratio - want; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: ratio %v, want %v", k, r.Ratio, want)
		}
	}
	if r, ok := got["BenchmarkNew ns/op"]; !ok || r.Note != "no baseline" {
		t.Errorf("a benchmark without a baseline must still be listed: %+v", r)
	}
	for _, k := range []string{"BenchmarkEgressVsRelay direct-MB/s", "BenchmarkGate overhead-ms/op", "BenchmarkSub/baseline vs cco ns/op"} {
		if _, ok := got[k]; ok {
			t.Errorf("unexpected row %q", k)
		}
	}
	var out strings.Builder
	if err := Write(&out, Rows(res)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "provision") || !strings.Contains(out.String(), "0.135") {
		t.Errorf("table:\n%s", out.String())
	}
}

func TestIsRatio(t *testing.T) {
	for unit, want := range map[string]bool{
		"ratio": true, "egress/relay": true, "shadow/bwrap": true,
		"ns/op": false, "MB/s": false, "gate-ms/op": false, "shadow-µs/launch": false, "direct-MB/s": false, "read-B/op": false,
	} {
		if got := isRatio(unit); got != want {
			t.Errorf("isRatio(%q) = %v", unit, got)
		}
	}
}
