package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cco-dev/cco/internal/suggest"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/safetext"
	"github.com/cco-dev/cco/managed"
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

var keys = withForeignPolicies([]key{
	{"agents", agent.Defaults(), "agents", "agents whose vendor steps run"},
	{"users", []string{}, "", "accounts whose homes are checked for vendor installs, besides root and SUDO_USER"},
	{"image", "auto", "", "image build mode: auto (container markers), yes or no"},
	{"shared_login_dir", "", "", "a directory (mounted into devcontainers) that holds the agents' login state"},
	{"shadow_path", "", "shadow-path", "the shadow binary to install (default: shadow beside cco-install, else /usr/lib/cco/shadow)"},
	{"egress_proxy_path", "", "egress-proxy-path", "the egress proxy binary to install (default: egress-proxy beside cco-install, else /usr/lib/cco/egress-proxy)"},
	{"lock_timeout", "2m", "lock-timeout", "how long a run waits for another run's lock"},
	{"progress", "auto", "progress", "download progress: auto, always or never"},
	{"bundle", "", "bundle", "offline bundle to install from, instead of the network"},
	{"auto_upgrade", false, "", "enable cco-upgrade.timer: a daily cco-install --upgrade all"},
	{"platform", "", "", "Claude Code platform (linux-x64, linux-arm64, -musl); empty: detected from the target root"},
	{"unpack_limit", fmt.Sprintf("%dGiB", vendorDefaults.UnpackLimit>>30), "", "most bytes an archive may unpack to"},
	{"download.retries", vendorDefaults.Retries, "", "retries of a failed download"},
	{"download.backoff", vendorDefaults.Backoff.String(), "", "first retry delay (doubling)"},
	{"download.retry_budget", vendorDefaults.RetryBudget.String(), "retry-budget", "the most time a run waits between download attempts, over all its downloads (a server's Retry-After included)"},
	{"download.timeout", fmt.Sprintf("%.0fs", vendorDefaults.Timeout.Seconds()), "", "per-request timeout: connect, headers, or a stalled read"},
})

// keyChoices are the keys with a closed set of values (each agent's file
// adds its own); every <agent>.foreign_policy is one too.
var keyChoices = map[string][]string{"image": {"auto", "yes", "no"}}

// withForeignPolicies adds <agent>.foreign_policy for every agent whose
// policy files are owned or refused (managed.ForeignFile).
func withForeignPolicies(ks []key) []key {
	for _, a := range agent.Names() {
		if file := managed.ForeignFile(a); file != "" {
			ks = append(ks, key{a + ".foreign_policy", managed.ForeignConflict, "", "a foreign " + file + " without the guard: conflict or warn"})
		}
	}
	return ks
}

// Config is the effective configuration, with where each value came from.
type Config struct {
	v      *viper.Viper
	file   *viper.Viper
	flags  *pflag.FlagSet
	path   string // host path of the file, for messages
	loaded bool   // the file exists
	text   []byte // the file, to find a key's line

	// Problems are the keys the configuration could not take: each is left
	// at its default, so status and config still show everything else.
	Problems []configProblem
	// Warnings are things to tell the operator that do not stop a run.
	Warnings []string

	Agents      []string
	Users       []string
	LockTimeout time.Duration
	Progress    string
	Bundle      string
	UnpackLimit int64
	Retries     int
	Backoff     time.Duration
	Timeout     time.Duration
	RetryBudget time.Duration
}

// configProblem is one key the configuration could not take.
type configProblem struct {
	Key     string `json:"key,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

func (p configProblem) String() string { return p.Message }

// Err is the configuration's problems as one error, or nil.
func (c *Config) Err() error {
	if len(c.Problems) == 0 {
		return nil
	}
	var lines []string
	for _, p := range c.Problems {
		lines = append(lines, safetext.Escape(p.Message))
	}
	return linesError{strings.Join(lines, "\n")}
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

// loadConfig reads defaults < <root>/etc/cco/install.toml < CCO_* env <
// flags. A bad key is a problem recorded in the Config, not the end of it:
// the key keeps its default and every other key is read.
func loadConfig(root provision.FileReader, flags *pflag.FlagSet) *Config {
	c := &Config{v: viper.New(), file: viper.New(), flags: flags, path: root.HostPath(ConfigPath)}
	for _, k := range keys {
		c.v.SetDefault(k.name, k.def)
	}
	c.v.SetEnvPrefix("CCO")
	c.v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	c.v.AllowEmptyEnv(true)
	c.v.AutomaticEnv()
	c.Warnings = unknownEnv(os.Environ())

	b, err := root.ReadFile(ConfigPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		c.Problems = append(c.Problems, configProblem{Message: fmt.Sprintf("reading %s: %v (its keys are left at their defaults)", c.path, err)})
	default:
		c.loaded, c.text = true, b
		vals := c.parseFile(b)
		for _, v := range []*viper.Viper{c.file, c.v} {
			if err := v.MergeConfigMap(vals); err != nil {
				c.Problems = append(c.Problems, configProblem{Message: fmt.Sprintf("%s: %v", c.path, err)})
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
	c.decode()
	return c
}

// parseFile reads the TOML file into the known keys' nested map. A syntax
// error drops its line (and is a problem with line and column) and the rest
// is read again; a key the installer does not know, or one spelled in
// another case (keys are lower case: case folding must not hide a typo), is
// a problem naming the closest key.
func (c *Config) parseFile(b []byte) map[string]any {
	text := append([]byte(nil), b...)
	var raw map[string]any
	for tries := 0; ; tries++ {
		raw = nil
		err := toml.Unmarshal(text, &raw)
		if err == nil {
			break
		}
		var de *toml.DecodeError
		if !errors.As(err, &de) || tries > 50 {
			c.Problems = append(c.Problems, configProblem{Message: fmt.Sprintf("%s does not parse: %v", c.path, err)})
			return nil
		}
		line, col := de.Position()
		key, _ := keyAt(b, line)
		msg := fmt.Sprintf("%s:%d:%d: does not parse: %s (the line is ignored)", c.path, line, col, de.Error())
		c.Problems = append(c.Problems, configProblem{Key: key, Line: line, Column: col, Message: msg})
		if !dropLine(text, line) {
			return nil
		}
	}
	known := map[string]bool{}
	for _, k := range keys {
		known[k.name] = true
	}
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for name, val := range m {
			full := prefix + name
			if sub, ok := val.(map[string]any); ok && !known[full] {
				walk(full+".", sub)
				continue
			}
			if !known[full] {
				line, col := lineOf(b, full)
				msg := fmt.Sprintf("%s:%d:%d: unknown key %q", c.path, line, col, full)
				if k := suggest.Closest(full, keyNames()); k != "" {
					msg += fmt.Sprintf(" (did you mean %q?", k) + " the keys are listed by `cco-install config`)"
				} else {
					msg += " (the keys are listed by `cco-install config`)"
				}
				c.Problems = append(c.Problems, configProblem{Key: full, Line: line, Column: col, Message: msg})
				continue
			}
			set(out, full, val)
		}
	}
	walk("", raw)
	return out
}

// set puts val at the dotted key in a nested map.
func set(m map[string]any, key string, val any) {
	head, rest, nested := strings.Cut(key, ".")
	if !nested {
		m[head] = val
		return
	}
	sub, _ := m[head].(map[string]any)
	if sub == nil {
		sub = map[string]any{}
		m[head] = sub
	}
	set(sub, rest, val)
}

// dropLine blanks line n (1-based) of text, or the last non-blank line
// before it when it is past the end or already blank (an unclosed array is
// reported where the file ends). It reports whether it blanked anything.
func dropLine(text []byte, n int) bool {
	lines := bytes.SplitAfter(text, []byte("\n"))
	if n > len(lines) {
		n = len(lines)
	}
	for i := n - 1; i >= 0; i-- {
		if len(bytes.TrimSpace(lines[i])) == 0 {
			continue
		}
		for j := range lines[i] {
			if lines[i][j] != '\n' {
				lines[i][j] = ' '
			}
		}
		return true
	}
	return false
}

// fileKey is one "key = value" line of the file: its dotted key (with the
// table it is in), line and column (1-based).
type fileKey struct {
	key       string
	line, col int
}

// fileKeys lists the file's key lines, a table header setting the prefix.
func fileKeys(b []byte) []fileKey {
	var out []fileKey
	table := ""
	for i, l := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			table = strings.Trim(t, "[] \t")
			continue
		}
		name, _, ok := strings.Cut(t, "=")
		if !ok {
			continue
		}
		n := strings.TrimSpace(name)
		k := strings.Trim(n, `"`)
		if table != "" {
			k = table + "." + k
		}
		out = append(out, fileKey{k, i + 1, strings.Index(l, n) + 1})
	}
	return out
}

// lineOf finds where the dotted key is set in the file, or 0, 0.
func lineOf(b []byte, full string) (int, int) {
	for _, k := range fileKeys(b) {
		if k.key == full {
			return k.line, k.col
		}
	}
	return 0, 0
}

// keyAt names the key set on line n, if any.
func keyAt(b []byte, n int) (string, bool) {
	for _, k := range fileKeys(b) {
		if k.line == n {
			return k.key, true
		}
	}
	return "", false
}

func keyNames() []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.name)
	}
	return out
}

// otherEnv are CCO_* variables that other parts of cco (the shadow, the
// jail, the tests) read: not the installer's, and not typos.
var otherEnv = []string{"CCO_AGENT", "CCO_SANDBOX", "CCO_JAIL", "CCO_JAIL_MARKER", "CCO_INSTALL", "CCO_RECEIPT", "CCO_REQUIRE_BWRAP"}

// otherEnvPrefixes are the prefixes of test-only variables.
var otherEnvPrefixes = []string{"CCO_TEST_", "CCO_VM_", "CCO_PTY_TEST_", "CCO_MOCK_", "CCO_EGRESS_TEST_", "CCO_GUARD_TEST_", "CCO_PROVISION_TEST_"}

// unknownEnv warns about each CCO_* variable that sets no key, naming the
// closest key: CCO_DOWNLOAD_RETRY would otherwise be silently ignored.
func unknownEnv(environ []string) []string {
	envKey := map[string]string{}
	var envNames []string
	for _, k := range keys {
		e := "CCO_" + strings.ToUpper(strings.ReplaceAll(k.name, ".", "_"))
		envKey[e] = k.name
		envNames = append(envNames, e)
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "CCO_") || envKey[name] != "" || contains(otherEnv, name) {
			continue
		}
		other := false
		for _, p := range otherEnvPrefixes {
			other = other || strings.HasPrefix(name, p)
		}
		if other {
			continue
		}
		w := fmt.Sprintf("warning: the environment variable %s sets no configuration key", name)
		if up := strings.ToUpper(name); up != name && envKey[up] != "" {
			w += fmt.Sprintf(" (variables are upper case: %s sets %s)", up, envKey[up])
		} else if e := suggest.Closest(strings.ToUpper(name), envNames); e != "" {
			w += fmt.Sprintf(" (did you mean %s, which sets %s?)", e, envKey[e])
		}
		out = append(out, w)
	}
	sort.Strings(out)
	return out
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

// bad records a key whose value cannot be used and puts it back to its
// default, so that the rest of the configuration still reads.
func (c *Config) bad(name string, val any, want string) {
	msg := fmt.Sprintf("configuration key %s = %q (from %s): %s", name, fmt.Sprint(val), c.Source(name), want)
	p := configProblem{Key: name, Message: msg}
	if strings.HasPrefix(c.Source(name), "file ") {
		p.Line, p.Column = lineOf(c.text, name)
		if p.Line > 0 {
			p.Message = fmt.Sprintf("%s:%d:%d: %s", c.path, p.Line, p.Column, msg)
		}
	}
	c.Problems = append(c.Problems, p)
	for _, k := range keys {
		if k.name == name {
			c.v.Set(name, k.def)
		}
	}
}

func (c *Config) duration(name string) time.Duration {
	s := c.String(name)
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		c.bad(name, s, "want a duration such as 30s or 2m")
		d, _ = time.ParseDuration(c.String(name))
	}
	return d
}

// decode validates every value and fills the typed fields; each bad value
// is a problem and the key's default stands in for it.
func (c *Config) decode() {
	c.Agents = c.List("agents")
	for _, a := range c.Agents {
		if !agent.Known(a) {
			c.bad("agents", strings.Join(c.Agents, ","), "the known agents are "+agent.List(agent.Names(), "and"))
			c.Agents = c.List("agents")
			break
		}
	}
	c.Users = c.List("users")
	c.Bundle = c.String("bundle")
	c.LockTimeout = c.duration("lock_timeout")
	c.Backoff = c.duration("download.backoff")
	c.Timeout = c.duration("download.timeout")
	if c.RetryBudget = c.duration("download.retry_budget"); c.RetryBudget == 0 {
		c.bad("download.retry_budget", c.String("download.retry_budget"), "want a duration above 0 such as 10s (to not retry at all, set download.retries = 0)")
		c.RetryBudget, _ = time.ParseDuration(c.String("download.retry_budget"))
	}
	switch c.Progress = c.String("progress"); c.Progress {
	case "auto", "always", "never":
	default:
		c.bad("progress", c.Progress, "want auto, always or never")
		c.Progress = c.String("progress")
	}
	var err error
	if c.Retries, err = strconv.Atoi(c.String("download.retries")); err != nil || c.Retries < 0 {
		c.bad("download.retries", c.String("download.retries"), "want a whole number, 0 or more")
		c.Retries = c.v.GetInt("download.retries")
	}
	if c.UnpackLimit, err = parseSize(c.String("unpack_limit")); err != nil {
		c.bad("unpack_limit", c.String("unpack_limit"), "want a size such as 4GiB or 500MiB")
		c.UnpackLimit, _ = parseSize(c.String("unpack_limit"))
	}
	allowed := maps.Clone(keyChoices)
	for _, a := range agent.Names() {
		if k := a + ".foreign_policy"; knownKey(k) {
			allowed[k] = []string{managed.ForeignConflict, managed.ForeignWarn}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(allowed)) {
		if v := c.String(name); !contains(allowed[name], v) {
			c.bad(name, v, "want "+strings.Join(allowed[name], " or "))
		}
	}
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
	// Problem says why the key's value could not be taken (with its line
	// and column in the file): the value shown is then the default.
	Problem string `json:"problem,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
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
		l := configLine{Key: k.name, Value: val, Source: c.Source(k.name)}
		for _, p := range c.Problems {
			if p.Key == k.name {
				// The bad value was dropped: the default stands.
				l.Problem, l.Line, l.Column, l.Source = p.Message, p.Line, p.Column, "default"
			}
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
