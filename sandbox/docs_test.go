package sandbox_test

// The reference pages' sandbox.toml table and the jail's JSON documents are
// held to the code here.

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/docscheck"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/sandbox/egress"
)

// TestDocsSandboxKeys: every key sandbox.toml takes has a row, and the
// default file cco-install writes shows every key too.
func TestDocsSandboxKeys(t *testing.T) {
	var code []string
	typ := reflect.TypeOf(sandbox.Config{})
	for i := 0; i < typ.NumField(); i++ {
		if k := strings.Split(typ.Field(i).Tag.Get("toml"), ",")[0]; k != "" && k != "-" {
			code = append(code, k)
		}
	}
	docscheck.TableOf(t, "docs/reference/configuration.md", "sandbox.toml").Check(t, "key", "key", code)
	for _, k := range code {
		if !strings.Contains(sandbox.DefaultConfigTOML, "# "+k+" = ") {
			t.Errorf("DefaultConfigTOML does not show the key %s at its default", k)
		}
	}
}

func TestDocsJailJSON(t *testing.T) {
	docscheck.TableOf(t, "docs/reference/json.md", "Jail marker").Check(t, "field", "field", docscheck.JSONFields(reflect.TypeOf(sandbox.Marker{})))
	docscheck.TableOf(t, "docs/reference/json.md", "Egress audit log").Check(t, "field", "field", docscheck.JSONFields(reflect.TypeOf(egress.Entry{})))
}
