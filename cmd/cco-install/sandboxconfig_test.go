package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/sandbox"
)

// TestConfigShowsUserLayer: `config --json` shows, for the invoking user,
// every effective sandbox.toml value with the file it came from, and a
// widening layer as the problem a launch would refuse with.
func TestConfigShowsUserLayer(t *testing.T) {
	root, home := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/cco"), 0o755)
	if err := os.WriteFile(filepath.Join(root, sandbox.ConfigPath), []byte("pass_env = [\"A\", \"B\"]\nhide = [\"/srv/x\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("root's sandbox.toml must be owned by root") // the CI runs this as root
	}
	layer := filepath.Join(home, sandbox.UserConfigRel)
	os.MkdirAll(filepath.Dir(layer), 0o755)
	os.WriteFile(layer, []byte("pass_env = [\"A\"]\negress = \"off\"\nhide = [\"~/p\"]\n"), 0o644)
	t.Setenv("HOME", home)
	t.Setenv("SUDO_USER", "")
	doc := configDoc(t, root)
	src := map[string]string{}
	val := map[string]any{}
	for _, k := range doc.Keys {
		src[k.Key], val[k.Key] = k.Source, k.Value
	}
	cfg := filepath.Join(root, sandbox.ConfigPath)
	if src["pass_env"] != layer || src["egress"] != layer || src["hide"] != cfg+" and "+layer || src["caches"] != "default" {
		t.Errorf("sources: %v", src)
	}
	if val["egress"] != "off" || val["caches"] != "persist" || len(val["hide"].([]any)) != 2 || len(val["pass_env"].([]any)) != 1 {
		t.Errorf("values: %v", val)
	}
	if len(doc.Files) != 2 || doc.Problem != "" {
		t.Errorf("files %v, problem %q", doc.Files, doc.Problem)
	}
	if len(doc.Keys) != len(sandbox.ConfigKeys()) {
		t.Errorf("%d keys shown, sandbox.toml has %d", len(doc.Keys), len(sandbox.ConfigKeys()))
	}
	// A widening layer: the refusal a launch would print.
	os.WriteFile(layer, []byte("pass_env = [\"SECRET\"]\n"), 0o644)
	if doc := configDoc(t, root); !strings.Contains(doc.Problem, `pass_env entry "SECRET"`) || !strings.Contains(doc.Problem, layer) {
		t.Errorf("problem = %q", doc.Problem)
	}
}

func configDoc(t *testing.T, root string) sandboxDoc {
	t.Helper()
	var out, errOut bytes.Buffer
	run([]string{"config", "--json", "--root", root}, strings.NewReader(""), &out, &errOut)
	var doc struct {
		Sandbox sandboxDoc `json:"sandbox"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("config --json: %v\n%s%s", err, out.String(), errOut.String())
	}
	return doc.Sandbox
}
