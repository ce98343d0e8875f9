// Package vendorfetch obtains the vendors' agent releases (Claude Code,
// Codex, Gemini CLI, and the agents only an npm registry serves: OpenCode,
// Droid, Pi and Copilot CLI) and installs them off PATH under
// /usr/libexec/cco:
// it resolves a channel or a pinned version, downloads from the vendor's
// store, an npm registry, a mirror or an offline bundle (streamed to disk
// through the hash, retried, resumed with Range), verifies every byte (size,
// sha256 or the npm integrity's sha512, the manifest's OpenPGP signature or
// the registry's ECDSA signature) before anything is placed, unpacks
// archives with the safe extractor of vendorfetch/extract, and switches a
// relative `current` link atomically. Each agent is one provision step over
// one release source, so one agent's failure never costs another.
package vendorfetch

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/vendorfetch/extract"
)

// VendorFingerprint is the fingerprint of Anthropic's Claude Code release
// signing key, the default expected one.
const VendorFingerprint = "31DDDE24DDFAB679F42D7BD2BAA929FF1A7ECACE"

// FirstSignedClaude is the first Claude Code version whose manifest is signed.
const FirstSignedClaude = "2.1.89"

// Step ids: vendor.<agent>.
const (
	StepClaude   = "vendor." + AgentClaude
	StepCodex    = "vendor." + AgentCodex
	StepGemini   = "vendor." + AgentGemini
	StepOpencode = "vendor." + AgentOpencode
	StepDroid    = "vendor." + AgentDroid
	StepPi       = "vendor." + AgentPi
	StepCopilot  = "vendor." + AgentCopilot
)

// Sources of claude's and codex's releases (claude.source, codex.source).
const (
	SourceStore = "store"
	SourceNpm   = "npm"
)

// PublicRegistry is the public npm registry.
const PublicRegistry = "https://registry.npmjs.org"

// The vendors' npm packages: the profiles' (agent.Installers.NPMPackage).
var (
	NpmClaude   = npmPackage(AgentClaude)
	NpmCodex    = npmPackage(AgentCodex)
	NpmGemini   = npmPackage(AgentGemini)
	NpmOpencode = npmPackage(AgentOpencode)
	NpmDroid    = npmPackage(AgentDroid)
	NpmPi       = npmPackage(AgentPi)
	NpmCopilot  = npmPackage(AgentCopilot)
)

// npmOnly are the agents only an npm registry serves, each with its own
// <name>.registry, .channel and .version (Config.Npm).
var npmOnly = []string{AgentOpencode, AgentDroid, AgentPi, AgentCopilot}

// NpmOnly lists the agents only an npm registry serves.
func NpmOnly() []string { return slices.Clone(npmOnly) }

// Title is the vendor's name of an agent this package installs ("" for
// none).
func Title(agent string) string {
	a, _ := lookupAgent(agent)
	return a.title
}

// RunsOnNode reports whether the agent is a Node program, run by the Node
// that its <agent>.node names.
func RunsOnNode(agent string) bool { return npmLayoutOf(agent).node }

// Native reports whether the agent's build is a native binary in a
// platform package, whose version is the installed one.
func Native(agent string) bool { return npmLayoutOf(agent).native }

func npmPackage(name string) string {
	p, ok := agent.Lookup(name)
	if !ok || p.Installers.NPMPackage == "" {
		panic("vendorfetch: the agent profile " + name + " names no npm package")
	}
	return p.Installers.NPMPackage
}

// Config is how the vendors' releases are obtained.
type Config struct {
	Agents []string // which agents' steps run (agent.Names())
	Claude ClaudeConfig
	Codex  CodexConfig
	Gemini GeminiConfig
	// Npm are the settings of the agents only an npm registry serves
	// (npmOnly), by name.
	Npm map[string]NpmConfig
	// NpmKeys is the path of a file of registry signing keys, in the form
	// of a registry's /-/npm/v1/keys answer, trusted besides the public
	// registry's keys shipped with cco ("" = those alone).
	NpmKeys     string
	UnpackLimit int64         // bytes; default 4 GiB
	Retries     int           // default 4
	Backoff     time.Duration // first retry delay, doubling; default 1s
	// RetryBudget is the most time one run waits between attempts, over
	// all its requests, Retry-After included (default 10s).
	RetryBudget time.Duration
	Timeout     time.Duration // per request: connect + response headers + any read stall; default 60s
	Bundle      string        // path of an offline bundle to install from ("" = network)
	Progress    string        // "auto" | "always" | "never"
	Upgrade     map[string]bool
	// AllowDowngrade lets a channel move an installed agent to an older
	// version (--allow-downgrade). Without it, a store or mirror that names
	// an older release than the installed one is refused.
	AllowDowngrade bool
	// AdoptExisting uses a Claude binary found in Users' homes (the vendor's
	// ~/.local/share/claude/versions/<v>) instead of downloading it, when its
	// bytes verify against the manifest (--adopt-existing).
	AdoptExisting bool
	Users         []*provision.User
	HTTPClient    *http.Client // nil = default transport honouring HTTPS_PROXY/NO_PROXY
	Log           io.Writer    // human progress lines (stderr)
	Platform      string       // "" = detect (linux-x64 / linux-arm64, -musl when the target root has musl)

	// Explicit names the configuration keys that were set explicitly (by the
	// config file, the environment or a flag) rather than defaulted, e.g.
	// "claude.channel": a pinned version together with an explicitly set
	// channel is an error, a pin beside the default channel is not.
	Explicit map[string]bool

	bundle *lazyBundle  // set by Steps: the bundle both steps share
	budget *retryBudget // set by withDefaults: the run's one retry budget
}

// ClaudeConfig is Claude Code's release store.
type ClaudeConfig struct {
	Channel, Version, BaseURL string
	// SigningKey is the path of an armored OpenPGP public key file; when
	// set, the manifest's detached signature is mandatory.
	SigningKey string
	// SigningFingerprint is the key's expected fingerprint (hex, default
	// VendorFingerprint); a key with another fingerprint is refused.
	SigningFingerprint string
	// Source is SourceStore (the release store above) or SourceNpm (the
	// package NpmClaude at Registry).
	Source, Registry string
}

// CodexConfig is Codex's release stores.
type CodexConfig struct {
	Channel, Version string
	// BaseURLs are stores in the primary layout, tried in order.
	BaseURLs []string
	// GitHubBaseURL and GitHubAPIURL are the GitHub-layout fallback
	// (empty disables it).
	GitHubBaseURL, GitHubAPIURL string
	// Source is SourceStore (the stores above) or SourceNpm (the package
	// NpmCodex at Registry).
	Source, Registry string
}

// GeminiConfig is Gemini CLI's npm registry.
type GeminiConfig struct {
	// Channel is a dist-tag (latest, preview, nightly); Version a pin.
	Channel, Version, Registry string
	// Node is the Node binary that runs Gemini CLI: a name looked up on
	// the target's system PATH, or an absolute path.
	Node string
}

// NpmConfig is an agent that only an npm registry serves: its dist-tag or
// pinned version and the registry.
type NpmConfig struct {
	Channel, Version, Registry string
	// Node, for a Node program (Pi), is the Node binary that runs it: a
	// name looked up on the target's system PATH, or an absolute path.
	Node string
}

// npmSettings are agent's npm settings: Gemini CLI's keys, or an npm-only
// agent's (false for claude and codex, whose npm source is an option).
func (c Config) npmSettings(agent string) (NpmConfig, bool) {
	if agent == AgentGemini {
		return NpmConfig{Channel: c.Gemini.Channel, Version: c.Gemini.Version, Registry: c.Gemini.Registry, Node: c.Gemini.Node}, true
	}
	n, ok := c.Npm[agent]
	return n, ok
}

// nodeOf is the Node binary setting (<agent>.node) of a Node program.
func (c Config) nodeOf(agent string) string {
	n, _ := c.npmSettings(agent)
	return n.Node
}

// DefaultChannel is an agent's channel when none is set and no version is
// pinned: the store's stable for Claude, npm's latest dist-tag otherwise.
func DefaultChannel(agent, source string) string {
	if agent == AgentClaude && source != SourceNpm {
		return "stable"
	}
	return "latest"
}

// DefaultConfig is the configuration when nothing is set.
func DefaultConfig() Config {
	return Config{
		Agents: agent.Defaults(),
		Claude: ClaudeConfig{
			Channel:            "stable",
			BaseURL:            ClaudeStoreURL,
			SigningFingerprint: VendorFingerprint,
			Source:             SourceStore,
			Registry:           PublicRegistry,
		},
		Codex: CodexConfig{
			Channel:       "latest",
			BaseURLs:      []string{CodexStoreURL},
			GitHubBaseURL: CodexGitHubBaseURL,
			GitHubAPIURL:  CodexGitHubAPIURL,
			Source:        SourceStore,
			Registry:      PublicRegistry,
		},
		Gemini: GeminiConfig{
			Channel:  "latest",
			Registry: PublicRegistry,
			Node:     "node",
		},
		Npm:         defaultNpm(),
		UnpackLimit: extract.DefaultLimit,
		Retries:     4,
		Backoff:     time.Second,
		RetryBudget: 10 * time.Second,
		Timeout:     60 * time.Second,
		Progress:    "auto",
	}
}

// defaultNpm is every npm-only agent's default: npm's latest dist-tag on
// the public registry, and the system's node for a Node program.
func defaultNpm() map[string]NpmConfig {
	m := map[string]NpmConfig{}
	for _, a := range npmOnly {
		n := NpmConfig{Channel: "latest", Registry: PublicRegistry}
		if npmLayoutOf(a).node {
			n.Node = "node"
		}
		m[a] = n
	}
	return m
}

// versionRE is the only shape a version may have before it names a path
// or a URL: versions come from the network and are untrusted.
var versionRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*(-[A-Za-z0-9.]+)?$`)

// CheckVersion refuses a version string that is not digits and dots with an
// optional -suffix of letters, digits and dots. what names where it came from.
func CheckVersion(what, v string) error {
	if !versionRE.MatchString(v) || len(v) > 64 {
		return fmt.Errorf("%s: %q is not a version (digits and dots, an optional -suffix of letters, digits and dots)", what, v)
	}
	return nil
}

var fingerprintRE = regexp.MustCompile(`^[0-9A-Fa-f]{40}$|^[0-9A-Fa-f]{64}$`)

// Validate checks the configuration and names the key at fault.
func (c Config) Validate() error {
	c = c.withDefaults()
	for _, a := range c.Agents {
		if _, ok := lookupAgent(a); !ok {
			return fmt.Errorf("agents: unknown agent %q (known: %s)", a, agentNames())
		}
	}
	if err := c.Claude.validate(c.Explicit); err != nil {
		return err
	}
	if err := c.Codex.validate(c.Explicit); err != nil {
		return err
	}
	if err := c.Gemini.validate(c.Explicit); err != nil {
		return err
	}
	for _, a := range npmOnly {
		if err := c.Npm[a].validate(a, c.Explicit); err != nil {
			return err
		}
	}
	if c.UnpackLimit < 0 {
		return fmt.Errorf("unpack_limit: %d is negative (bytes; default %d)", c.UnpackLimit, extract.DefaultLimit)
	}
	if c.Retries < 0 {
		return fmt.Errorf("retries: %d is negative", c.Retries)
	}
	if c.Backoff < 0 || c.Timeout < 0 || c.RetryBudget < 0 {
		return fmt.Errorf("backoff %v / timeout %v / retry budget %v: durations must not be negative", c.Backoff, c.Timeout, c.RetryBudget)
	}
	if !slices.Contains([]string{"", "auto", "always", "never"}, c.Progress) {
		return fmt.Errorf("progress: %q is not auto, always or never", c.Progress)
	}
	if c.Platform != "" {
		if _, err := platformArch(c.Platform); err != nil {
			return err
		}
	}
	for a := range c.Upgrade {
		if _, ok := lookupAgent(a); !ok {
			return fmt.Errorf("--upgrade: unknown agent %q (known: %s)", a, agentNames())
		}
	}
	return nil
}

// checkSource refuses a source (claude.source, codex.source) that is
// neither the store nor npm.
func checkSource(key, val string) error {
	if val != SourceStore && val != SourceNpm {
		return fmt.Errorf("%s: %q is not a source (store or npm)", key, val)
	}
	return nil
}

// storeChannels are the channels a store knows; an npm registry's are its
// dist-tags, any of which may be named (nil).
func storeChannels(source string, channels ...string) []string {
	if source == SourceNpm {
		return nil
	}
	return channels
}

// distTagRE is the shape of an npm dist-tag (a channel of an npm source).
var distTagRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]{0,63}$`)

func checkPinOrChannel(agent, pin, channel string, channels []string, explicit map[string]bool) error {
	if pin != "" {
		if err := CheckVersion(agent+".version", pin); err != nil {
			return err
		}
		if explicit[agent+".channel"] {
			return fmt.Errorf("%s.version %q and %s.channel %q are both set: set one of them", agent, pin, agent, channel)
		}
		return nil
	}
	if channels != nil && !slices.Contains(channels, channel) {
		return fmt.Errorf("%s.channel: %q is not a channel (%s)", agent, channel, strings.Join(channels, " or "))
	}
	if channels == nil && !distTagRE.MatchString(channel) {
		return fmt.Errorf("%s.channel: %q is not an npm dist-tag (such as latest, preview or nightly)", agent, channel)
	}
	return nil
}

func checkURL(key, s string, emptyOK bool) error {
	if s == "" {
		if emptyOK {
			return nil
		}
		return fmt.Errorf("%s: empty (a store URL such as https://mirror.example/path)", key)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%s: %q does not parse as a URL: %v", key, s, err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%s: %q is not an http(s) URL with a host", key, s)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%s: %q has a query or fragment; give the store's base path only", key, s)
	}
	return nil
}

// withDefaults fills zero values a caller left unset.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.UnpackLimit == 0 {
		c.UnpackLimit = d.UnpackLimit
	}
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	if c.RetryBudget == 0 {
		c.RetryBudget = d.RetryBudget
	}
	if c.budget == nil {
		c.budget = newRetryBudget(c.RetryBudget)
	}
	if c.Claude.SigningFingerprint == "" {
		c.Claude.SigningFingerprint = VendorFingerprint
	}
	if c.Claude.Source == "" {
		c.Claude.Source = SourceStore
	}
	if c.Codex.Source == "" {
		c.Codex.Source = SourceStore
	}
	for _, r := range []*string{&c.Claude.Registry, &c.Codex.Registry, &c.Gemini.Registry} {
		if *r == "" {
			*r = PublicRegistry
		}
	}
	if c.Gemini.Node == "" {
		c.Gemini.Node = d.Gemini.Node
	}
	// A channel defaults only when no version is pinned.
	if c.Claude.Channel == "" && c.Claude.Version == "" {
		c.Claude.Channel = DefaultChannel(AgentClaude, c.Claude.Source)
	}
	if c.Codex.Channel == "" && c.Codex.Version == "" {
		c.Codex.Channel = DefaultChannel(AgentCodex, c.Codex.Source)
	}
	if c.Gemini.Channel == "" && c.Gemini.Version == "" {
		c.Gemini.Channel = DefaultChannel(AgentGemini, SourceNpm)
	}
	npm := map[string]NpmConfig{}
	for _, a := range npmOnly {
		n, dn := c.Npm[a], d.Npm[a]
		if n.Registry == "" {
			n.Registry = dn.Registry
		}
		if n.Node == "" {
			n.Node = dn.Node
		}
		if n.Channel == "" && n.Version == "" {
			n.Channel = DefaultChannel(a, SourceNpm)
		}
		npm[a] = n
	}
	c.Npm = npm
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}
