package sandbox

import (
	"strings"
	"testing"
)

// RootView maps bwrap's own uid and gid to 0 inside, in the user
// namespace bwrap makes; nothing else of the argv changes.
func TestArgvRootView(t *testing.T) {
	s := &Spec{Workspace: "/w", Command: []string{"/bin/true"}}
	plain := strings.Join(Argv(s), " ")
	s.RootView = true
	got := strings.Join(Argv(s), " ")
	if strings.Contains(plain, "--uid") {
		t.Fatalf("without RootView: %s", plain)
	}
	want := strings.Replace(plain, "--unshare-cgroup-try", "--unshare-cgroup-try --uid 0 --gid 0", 1)
	if got != want || !strings.Contains(got, "--unshare-user --disable-userns") {
		t.Errorf("RootView argv:\n%s\nwant\n%s", got, want)
	}
}
