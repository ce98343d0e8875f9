package vendorfetch

import (
	"reflect"
	"testing"

	"github.com/cco-dev/cco/internal/docscheck"
)

// TestDocsVendorState: the receipt's record of an installed agent is the
// reference's table.
func TestDocsVendorState(t *testing.T) {
	docscheck.TableOf(t, "docs/reference/json.md", "Vendor state").Check(t, "field", "field", docscheck.JSONFields(reflect.TypeOf(agentState{})))
}
