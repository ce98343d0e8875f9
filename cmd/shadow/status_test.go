package main

import (
	"strings"
	"testing"
)

func TestReadChildPID(t *testing.T) {
	for in, want := range map[string]int{
		`{ "child-pid": 2395, "mnt-namespace": 4026532177, "pid-namespace": 4026532178 }` + "\n" + `{ "exit-code": 3 }` + "\n": 2395,
		`{"child-pid":17}`:   17,
		"":                   0,
		`{ "exit-code": 1 }`: 0,
	} {
		if got := readChildPID(strings.NewReader(in)); got != want {
			t.Errorf("readChildPID(%q) = %d, want %d", in, got, want)
		}
	}
}
