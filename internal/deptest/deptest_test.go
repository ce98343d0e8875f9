package deptest

import (
	"fmt"
	"strings"
	"testing"
)

// recorder keeps what Check reports instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Helper() {}

// A package that links a forbidden one is reported, with the reason, for
// each platform; a prefix ending in /... covers what is below it.
func TestCheckFindsForbidden(t *testing.T) {
	r := &recorder{TB: t}
	Check(r, "github.com/cco-dev/cco/cmd/egress-proxy", map[string]string{
		"net/http": "a test reason",
		"github.com/cco-dev/cco/sandbox/egress/...": "below a prefix",
		"github.com/cco-dev/cco/provision":          "not linked",
	})
	got := strings.Join(r.errs, "\n")
	for _, want := range []string{"links net/http on linux/amd64: a test reason", "links net/http on linux/arm64",
		"links github.com/cco-dev/cco/sandbox/egress/policy on linux/amd64: below a prefix"} {
		if !strings.Contains(got, want) {
			t.Errorf("Check's report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "provision") {
		t.Errorf("a package not linked was reported:\n%s", got)
	}
}
