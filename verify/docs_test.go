package verify_test

import (
	"reflect"
	"testing"

	"github.com/cco-dev/cco/internal/docscheck"
	"github.com/cco-dev/cco/verify"
)

// TestDocsVerify holds docs/reference/verify.md's checks and json.md's
// documents to the code.
func TestDocsVerify(t *testing.T) {
	docscheck.TableOf(t, "docs/reference/verify.md", "Checks").Check(t, "id", "check", verify.CheckIDs)
	docscheck.TableOf(t, "docs/reference/json.md", "Verify document").Check(t, "field", "field", docscheck.JSONFields(reflect.TypeOf(verify.Result{})))
	docscheck.TableOf(t, "docs/reference/json.md", "Jail verified").Check(t, "field", "field", docscheck.JSONFields(reflect.TypeOf(verify.Status{})))
}
