package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
	"github.com/cco-dev/cco/vendorfetch"
)

// The npm sources' keys of install.toml reach the vendor step; a wrong
// value names its key and the file.
func TestVendorNpmKeys(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "etc/cco"), 0o755)
	write := func(s string) *Config {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, ConfigPath), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return loadConfig(provisiontest.Root(t, dir), nil)
	}
	for _, k := range []string{"CCO_AGENTS", "CCO_CLAUDE_SOURCE", "CCO_GEMINI_NODE", "CCO_NPM_KEYS"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	cfg := write(`agents = ["claude", "gemini"]
npm_keys = "/etc/cco/npm-keys.json"
[claude]
source = "npm"
registry = "https://npm.example.com/api/npm/remote"
[gemini]
channel = "preview"
node = "/opt/node22/bin/node"
registry = "https://npm.example.com/api/npm/remote/"
`)
	if err := cfg.Err(); err != nil {
		t.Fatal(err)
	}
	view := &provision.View{Root: provisiontest.Root(t, dir).ReadOnly(), Receipt: &provision.Receipt{}, Log: os.Stderr}
	v, err := vendorConfig(cfg, view, &options{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Claude.Source != vendorfetch.SourceNpm || v.Claude.Registry != "https://npm.example.com/api/npm/remote" || v.NpmKeys != "/etc/cco/npm-keys.json" {
		t.Errorf("claude %+v, npm_keys %q", v.Claude, v.NpmKeys)
	}
	if v.Gemini.Channel != "preview" || v.Gemini.Node != "/opt/node22/bin/node" || v.Codex.Source != vendorfetch.SourceStore {
		t.Errorf("gemini %+v, codex source %q", v.Gemini, v.Codex.Source)
	}
	// Pinned beside an explicit channel: one of them must go.
	cfg = write("[gemini]\nchannel = \"latest\"\nversion = \"0.61.0\"\n")
	if _, err := vendorConfig(cfg, view, &options{}); err == nil || !strings.Contains(err.Error(), "gemini.version \"0.61.0\" and gemini.channel \"latest\" are both set") {
		t.Errorf("err = %v", err)
	}
	cfg = write("[codex]\nsource = \"pip\"\n")
	if _, err := vendorConfig(cfg, view, &options{}); err == nil || !strings.Contains(err.Error(), `codex.source: "pip" is not a source (store or npm)`) {
		t.Errorf("err = %v", err)
	}
	// Every key is listed by `cco-install config`, with its default.
	cfg = write("")
	seen := map[string]any{}
	for _, l := range cfg.Lines() {
		seen[l.Key] = l.Value
	}
	for k, want := range map[string]any{"claude.source": "store", "codex.source": "store", "claude.registry": vendorfetch.PublicRegistry, "codex.registry": vendorfetch.PublicRegistry, "gemini.registry": vendorfetch.PublicRegistry, "gemini.channel": "", "gemini.version": "", "gemini.node": "node", "npm_keys": ""} {
		if got, ok := seen[k]; !ok || got != want {
			t.Errorf("config lists %s = %v (listed: %v), want %v", k, got, ok, want)
		}
	}
}
