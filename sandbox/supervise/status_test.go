package supervise

import (
	"os"
	"strings"
	"testing"
)

// statusOf is a jailStatus over a pipe that holds in; open keeps the write
// end open (a stray jail process holding the stream).
func statusOf(t *testing.T, in string, open bool) *Status {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	w.WriteString(in)
	if !open {
		w.Close()
	}
	return NewStatus(r)
}

func TestJailStatus(t *testing.T) {
	for _, tc := range []struct {
		in   string
		pid  int
		ran  bool
		open bool
	}{
		{in: `{ "child-pid": 2395, "mnt-namespace": 4026532177, "pid-namespace": 4026532178 }` + "\n" + `{ "exit-code": 3 }` + "\n", pid: 2395, ran: true},
		{in: `{ "child-pid": 2395, "mnt-namespace": 4026532177 }` + "\n", pid: 2395},
		{in: `{ "child-pid": 2395 }` + "\n", pid: 2395, open: true},
		{in: `{ "child-pid": 7 }` + "\n" + `{ "exit-code": 0 }` + "\n", pid: 7, ran: true, open: true},
		{in: `{"child-pid":17}`, pid: 17},
		{in: "", pid: 0},
		{in: `{ "exit-code": 1 }`, pid: 0},
	} {
		st := statusOf(t, tc.in, tc.open)
		if got := st.ChildPID(); got != tc.pid {
			t.Errorf("childPID(%q) = %d, want %d", tc.in, got, tc.pid)
		}
		if tc.pid == 0 {
			continue
		}
		if got := st.Ran(); got != tc.ran {
			t.Errorf("ran(%q, open %v) = %v, want %v", tc.in, tc.open, got, tc.ran)
		}
	}
}

// Inside a container the refusal names the engine's settings that bwrap
// needs, and never --privileged as the fix.
func TestContainerRefusal(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "container" {
				return v
			}
			return ""
		}
	}
	if !InContainer(env("podman")) {
		t.Error("container=podman is a container")
	}
	msg := ContainerFix("bwrap: No permissions to create new namespace")
	for _, want := range []string{"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined", "runArgs", "never --privileged", "No permissions to create new namespace", "examples/Dockerfile"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the container refusal lacks %q:\n%s", want, msg)
		}
	}
}
