package vendorfetch

import (
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision/provisiontest"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Claude.Channel != "stable" || c.Codex.Channel != "latest" || c.UnpackLimit != 4<<30 || c.Retries != 4 ||
		c.Claude.SigningFingerprint != "31DDDE24DDFAB679F42D7BD2BAA929FF1A7ECACE" ||
		c.Codex.GitHubAPIURL != "https://api.github.com/repos/openai/codex/releases/latest" {
		t.Errorf("defaults: %+v", c)
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	cases := []struct {
		name string
		mod  func(c *Config)
		want string
	}{
		{"unknown agent", func(c *Config) { c.Agents = []string{"claude", "aider"} }, `agents: unknown agent "aider"`},
		{"bad claude version", func(c *Config) { c.Claude.Version = "2.1/../x" }, `claude.version: "2.1/../x" is not a version`},
		{"bad codex version", func(c *Config) { c.Codex.Version = "latest" }, `codex.version: "latest" is not a version`},
		{"pin and explicit channel", func(c *Config) {
			c.Claude.Version = "2.1.3"
			c.Explicit = map[string]bool{"claude.channel": true}
		}, "claude.version \"2.1.3\" and claude.channel \"stable\" are both set"},
		{"codex pin and explicit channel", func(c *Config) {
			c.Codex.Version = "0.1.0"
			c.Explicit = map[string]bool{"codex.channel": true}
		}, "codex.version \"0.1.0\" and codex.channel"},
		{"bad channel", func(c *Config) { c.Claude.Channel = "nightly" }, `claude.channel: "nightly" is not a channel`},
		{"bad url", func(c *Config) { c.Claude.BaseURL = "ftp://x/y" }, `claude.base_url: "ftp://x/y" is not an http(s) URL`},
		{"empty base url", func(c *Config) { c.Codex.BaseURLs = []string{"https://a", ""} }, "codex.base_urls[1]: empty"},
		{"url with query", func(c *Config) { c.Codex.GitHubBaseURL = "https://x/y?z" }, "codex.github_base_url"},
		{"negative limit", func(c *Config) { c.UnpackLimit = -1 }, "unpack_limit: -1"},
		{"bad progress", func(c *Config) { c.Progress = "sometimes" }, `progress: "sometimes"`},
		{"bad platform", func(c *Config) { c.Platform = "darwin-arm64" }, `platform: "darwin-arm64"`},
		{"bad fingerprint", func(c *Config) { c.Claude.SigningFingerprint = "abc" }, "claude.signing_fingerprint"},
		{"bad upgrade", func(c *Config) { c.Upgrade = map[string]bool{"vim": true} }, `--upgrade: unknown agent "vim"`},
		{"bad source", func(c *Config) { c.Codex.Source = "pypi" }, `codex.source: "pypi" is not a source (store or npm)`},
		{"bad registry", func(c *Config) { c.Gemini.Registry = "registry.example" }, `gemini.registry: "registry.example" is not an http(s) URL`},
		{"claude registry", func(c *Config) { c.Claude.Registry = "https://r/x?y" }, "claude.registry"},
		{"bad dist-tag", func(c *Config) { c.Gemini.Channel = "pre view" }, `gemini.channel: "pre view" is not an npm dist-tag`},
		{"gemini pin and channel", func(c *Config) {
			c.Gemini.Version = "0.61.0"
			c.Explicit = map[string]bool{"gemini.channel": true}
		}, "gemini.version \"0.61.0\" and gemini.channel"},
		{"bad gemini version", func(c *Config) { c.Gemini.Version = "../0.61" }, "gemini.version"},
		{"relative node", func(c *Config) { c.Gemini.Node = "bin/node" }, `gemini.node: "bin/node" is neither`},
		{"store channel on npm", func(c *Config) { c.Codex.Channel = "alpha" }, `codex.channel: "alpha" is not a channel (latest)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// A pin beside the defaulted channel is fine; empty GitHub URLs disable
	// the fallback.
	c := DefaultConfig()
	c.Claude.Version, c.Codex.Version = "2.1.3", "0.169.0-alpha.1"
	c.Codex.GitHubBaseURL, c.Codex.GitHubAPIURL = "", ""
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	// An npm source's channel is any dist-tag; claude's defaults to latest.
	c = DefaultConfig()
	c.Codex.Source, c.Codex.Channel = SourceNpm, "alpha"
	c.Claude.Source, c.Claude.Channel = SourceNpm, ""
	c.Gemini.Channel, c.Gemini.Node = "nightly", "/opt/node/bin/node"
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	if d := c.withDefaults(); d.Claude.Channel != "latest" {
		t.Errorf("claude from npm defaults to the channel %q, want latest", d.Claude.Channel)
	}
}

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"2.1.3", "0.169.0", "1", "0.1.0-alpha.2", "2.1.3-rc1"} {
		if err := CheckVersion("x", v); err != nil {
			t.Errorf("%q refused: %v", v, err)
		}
	}
	for _, v := range []string{"", "v1.2", "1..2", "1.2/3", "../1", "1.2-", "1.2-a_b", "1.2 ", "1.2\n3", "-1", strings.Repeat("1.", 40) + "1"} {
		if err := CheckVersion("x", v); err == nil {
			t.Errorf("%q accepted", v)
		} else if !strings.Contains(err.Error(), "x: ") {
			t.Errorf("error %q does not name where it came from", err)
		}
	}
}

func TestParseCodexVersion(t *testing.T) {
	for in, want := range map[string]string{
		"0.169.0": "0.169.0", "rust-v0.169.0\n": "0.169.0", "v0.2.0": "0.2.0",
		`{"tag_name":"rust-v0.5.0"}`: "0.5.0", `{"tag":"0.6.0"}`: "0.6.0", `{"version":"0.7.0"}`: "0.7.0",
	} {
		v, _, err := parseCodexVersion("u", []byte(in))
		if err != nil || v != want {
			t.Errorf("%q -> %q, %v", in, v, err)
		}
	}
	for _, in := range []string{"<html>", `{"name":"x"}`, "rust-v../x", `{"tag_name": 5}`} {
		if _, _, err := parseCodexVersion("u", []byte(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestDetectPlatformArch(t *testing.T) {
	old := goarch
	defer func() { goarch = old }()
	root := provisiontest.Root(t, t.TempDir())
	for arch, want := range map[string]string{"amd64": "linux-x64", "arm64": "linux-arm64"} {
		goarch = arch
		if p, err := DetectPlatform(root); err != nil || p != want {
			t.Errorf("%s: %q, %v", arch, p, err)
		}
	}
	goarch = "riscv64"
	if _, err := DetectPlatform(root); err == nil || !strings.Contains(err.Error(), "riscv64") {
		t.Errorf("riscv64: %v", err)
	}
	if codexTarget("linux-arm64-musl") != "aarch64-unknown-linux-musl" || codexTarget("linux-x64") != "x86_64-unknown-linux-musl" {
		t.Error("codex targets")
	}
}
