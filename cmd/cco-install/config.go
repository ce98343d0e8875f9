package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/cco-dev/cco/provision"
)

// ConfigPath is the installer's configuration file on the target system.
const ConfigPath = "/etc/cco/install.toml"

// key is one configuration key: its default and, when a flag also sets it,
// the flag's name. The table is the whole set: any other key in the file is
// an error.
type key struct {
	name string
	def  any
	flag string
	doc  string
}

var keys = []key{
	{"agents", []string{"claude", "codex"}, "agents", "agents whose vendor steps run"},
	{"users", []string{}, "", "accounts whose homes are checked for vendor installs, besides root and SUDO_USER"},
	{"image", "auto", "", "image build mode: auto (container markers), yes or no"},
	{"shared_login_dir", "", "", "a directory (mounted into devcontainers) that holds the agents' login state"},
	{"shadow_path", "", "shadow-path", "the shadow binary to install (default: shadow beside cco-install, else /usr/lib/cco/shadow)"},
	{"egress_proxy_path", "", "egress-proxy-path", "the egress proxy binary to install (default: egress-proxy beside cco-install, else /usr/lib/cco/egress-proxy)"},
	{"lock_timeout", "2m", "lock-timeout", "how long a run waits for another run's lock"},
	{"progress", "auto", "progress", "download progress: auto, always or never"},
	{"bundle", "", "bundle", "offline bundle to install from, instead of the network"},
	{"auto_upgrade", false, "", "enable cco-upgrade.timer: a daily cco-install --upgrade all"},
	{"claude.channel", "", "", "Claude Code release channel (stable when no version is pinned)"},
	{"claude.version", "", "", "pinned Claude Code version"},
	{"claude.base_url", "https://downloads.claude.ai/claude-code-releases", "", "Claude Code release store"},
	{"claude.signing_key", "", "", "armored OpenPGP public key file for manifest signatures"},
	{"claude.signing_fingerprint", "31DDDE24DDFAB679F42D7BD2BAA929FF1A7ECACE", "", "the expected fingerprint of claude.signing_key"},
	{"platform", "", "", "Claude Code platform (linux-x64, linux-arm64, -musl); empty: detected from the target root"},
	{"claude.managed_file", "dropin", "", "dropin (managed-settings.d/50-cco.json) or base (managed-settings.json)"},
	{"codex.channel", "", "", "Codex release channel (latest when no version is pinned)"},
	{"codex.version", "", "", "pinned Codex version"},
	{"codex.base_urls", []string{"https://releases.openai.com/codex"}, "", "Codex release stores, in order"},
	{"codex.github_base_url", "https://github.com/openai/codex/releases/download", "", "GitHub-layout fallback downloads (empty disables)"},
	{"codex.github_api_url", "https://api.github.com/repos/openai/codex/releases/latest", "", "GitHub API for the fallback's latest release (empty disables)"},
	{"codex.foreign_policy", "conflict", "", "a foreign requirements.toml without the guard: conflict or warn"},
	{"unpack_limit", "4GiB", "", "most bytes an archive may unpack to"},
	{"download.retries", 4, "", "retries of a failed download"},
	{"download.backoff", "1s", "", "first retry delay (doubling)"},
	{"download.timeout", "60s", "", "per-request timeout: connect, headers, or a stalled read"},
}

// Config is the effective configuration, with where each value came from.
type Config struct {
	v      *viper.Viper
	file   *viper.Viper
	flags  *pflag.FlagSet
	path   string // host path of the file, for messages
	loaded bool   // the file exists

	Agents      []string
	Users       []string
	LockTimeout time.Duration
	Progress    string
	Bundle      string
	UnpackLimit int64
	Retries     int
	Backoff     time.Duration
	Timeout     time.Duration
}

// addConfigFlags declares the flags that also set configuration keys.
func addConfigFlags(fs *pflag.FlagSet) {
	for _, k := range keys {
		if k.flag == "" {
			continue
		}
		switch d := k.def.(type) {
		case []string:
			fs.StringSlice(k.flag, d, k.doc)
		case string:
			fs.String(k.flag, d, k.doc)
		}
	}
}

// loadConfig reads defaults < <root>/etc/cco/install.toml < CCO_* env < flags.
func loadConfig(root *provision.Root, flags *pflag.FlagSet) (*Config, error) {
	c := &Config{v: viper.New(), file: viper.New(), flags: flags, path: root.HostPath(ConfigPath)}
	for _, k := range keys {
		c.v.SetDefault(k.name, k.def)
	}
	c.v.SetEnvPrefix("CCO")
	c.v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	c.v.AllowEmptyEnv(true)
	c.v.AutomaticEnv()

	b, err := root.ReadFile(ConfigPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", c.path, err)
	default:
		c.loaded = true
		for _, v := range []*viper.Viper{c.file, c.v} {
			v.SetConfigType("toml")
			if err := v.ReadConfig(bytes.NewReader(b)); err != nil {
				return nil, fmt.Errorf("%s does not parse: %v", c.path, err)
			}
		}
		known := map[string]bool{}
		for _, k := range keys {
			known[k.name] = true
		}
		for _, k := range c.file.AllKeys() {
			if !known[k] {
				return nil, fmt.Errorf("%s: unknown key %q (the keys are listed by `cco-install config`)", c.path, k)
			}
		}
	}
	if flags != nil {
		for _, k := range keys {
			if f := flags.Lookup(k.flag); k.flag != "" && f != nil && f.Changed {
				c.v.Set(k.name, flagValue(f))
			}
		}
	}
	return c, c.decode()
}

func flagValue(f *pflag.Flag) any {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		return sv.GetSlice()
	}
	return f.Value.String()
}

// Source says where the effective value of key came from.
func (c *Config) Source(name string) string {
	for _, k := range keys {
		if k.name == name && k.flag != "" && c.flags != nil {
			if f := c.flags.Lookup(k.flag); f != nil && f.Changed {
				return "flag --" + k.flag
			}
		}
	}
	env := "CCO_" + strings.ToUpper(strings.ReplaceAll(name, ".", "_"))
	if _, ok := os.LookupEnv(env); ok {
		return "env " + env
	}
	if c.loaded && c.file.IsSet(name) {
		return "file " + c.path
	}
	return "default"
}

// IsSet reports whether key was set anywhere but the defaults.
func (c *Config) IsSet(name string) bool { return c.Source(name) != "default" }

// String returns a string key.
func (c *Config) String(name string) string { return c.v.GetString(name) }

// List returns a list key; from the environment a list is written with
// commas or spaces ("claude,codex"), and an empty variable is an empty list.
func (c *Config) List(name string) []string {
	raw := c.v.Get(name)
	if s, ok := raw.(string); ok {
		return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
	}
	var out []string
	for _, s := range c.v.GetStringSlice(name) {
		out = append(out, strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })...)
	}
	return out
}

func (c *Config) bad(name string, val any, want string) error {
	return fmt.Errorf("configuration key %s = %q (from %s): %s", name, fmt.Sprint(val), c.Source(name), want)
}

func (c *Config) duration(name string) (time.Duration, error) {
	s := c.String(name)
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, c.bad(name, s, "want a duration such as 30s or 2m")
	}
	return d, nil
}

// decode validates every value and fills the typed fields.
func (c *Config) decode() error {
	var err error
	c.Agents = c.List("agents")
	for _, a := range c.Agents {
		if a != "claude" && a != "codex" {
			return c.bad("agents", strings.Join(c.Agents, ","), "the known agents are claude and codex")
		}
	}
	c.Users = c.List("users")
	c.Bundle = c.String("bundle")
	if c.LockTimeout, err = c.duration("lock_timeout"); err != nil {
		return err
	}
	if c.Backoff, err = c.duration("download.backoff"); err != nil {
		return err
	}
	if c.Timeout, err = c.duration("download.timeout"); err != nil {
		return err
	}
	switch c.Progress = c.String("progress"); c.Progress {
	case "auto", "always", "never":
	default:
		return c.bad("progress", c.Progress, "want auto, always or never")
	}
	if c.Retries, err = strconv.Atoi(c.String("download.retries")); err != nil || c.Retries < 0 {
		return c.bad("download.retries", c.String("download.retries"), "want a whole number, 0 or more")
	}
	if c.UnpackLimit, err = parseSize(c.String("unpack_limit")); err != nil {
		return c.bad("unpack_limit", c.String("unpack_limit"), "want a size such as 4GiB or 500MiB")
	}
	for name, allowed := range map[string][]string{
		"claude.managed_file":  {"dropin", "base"},
		"codex.foreign_policy": {"conflict", "warn"},
		"image":                {"auto", "yes", "no"},
	} {
		if v := c.String(name); !contains(allowed, v) {
			return c.bad(name, v, "want "+strings.Join(allowed, " or "))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseSize reads "4GiB", "500MiB", "1024" (bytes).
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mul    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	s = strings.TrimSpace(s)
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mul = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mul, nil
}

// configLine is one key in `cco-install config`.
type configLine struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Source string `json:"source"`
}

// Lines lists every key's effective value and source, sorted by key.
func (c *Config) Lines() []configLine {
	var out []configLine
	for _, k := range keys {
		var val any = c.String(k.name)
		if _, ok := k.def.(int); ok {
			val = c.v.GetInt(k.name)
		}
		if _, ok := k.def.([]string); ok {
			l := c.List(k.name)
			if l == nil {
				l = []string{}
			}
			val = l
		}
		out = append(out, configLine{Key: k.name, Value: val, Source: c.Source(k.name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
