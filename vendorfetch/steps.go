package vendorfetch

import (
	"fmt"
	"sync"

	"github.com/cco-dev/cco/provision"
)

// Steps are the provision steps that install the agents of cfg.Agents
// (vendor.claude, vendor.codex, vendor.gemini), each on its own so that one
// agent's failure never costs another.
func Steps(cfg Config) []provision.Step {
	cfg = cfg.withDefaults()
	if cfg.Bundle != "" {
		// Every step reads one bundle: check it once.
		cfg.bundle = &lazyBundle{path: cfg.Bundle}
	}
	var out []provision.Step
	for _, name := range cfg.Agents {
		if a, ok := lookupAgent(name); ok {
			out = append(out, &vendorStep{agent: a, cfg: cfg})
		}
	}
	return out
}

// newReleaseSource is where agent's releases come from under cfg: its
// store, its npm package, or the bundle's copy of either.
func newReleaseSource(cfg Config, agent string) releaseSource {
	switch {
	case agent == AgentClaude && cfg.Claude.Source != SourceNpm:
		if cfg.Bundle != "" {
			cfg.Claude.BaseURL = bundleClaudeBase
		}
		return &claudeStore{cfg: cfg}
	case agent == AgentCodex && cfg.Codex.Source != SourceNpm:
		if cfg.Bundle != "" {
			cfg.Codex.BaseURLs, cfg.Codex.GitHubBaseURL, cfg.Codex.GitHubAPIURL = []string{bundleCodexBase}, "", ""
		}
		return &codexSource{cfg: cfg}
	}
	return newNpmSource(cfg, agent)
}

// agentSource is the transport of agent's release, with the version
// pinned (by configuration or by the bundle) and the channel otherwise.
// target is the build the bundle must hold.
func agentSource(cfg Config, agent, target string) (source, string, string, error) {
	pin, channel := cfg.settings(agent)
	if pin != "" {
		channel = ""
	}
	if cfg.Bundle == "" {
		return newNetSource(cfg), pin, channel, nil
	}
	lb := cfg.bundle
	if lb == nil {
		lb = &lazyBundle{path: cfg.Bundle}
	}
	b, err := lb.get()
	if err != nil {
		return nil, "", "", err
	}
	ent, ok := b.index.Agents[agent]
	if !ok {
		return nil, "", "", fmt.Errorf("the bundle %s holds no %s release (make it with agents including %s)", cfg.Bundle, agent, agent)
	}
	if pin != "" && pin != ent.Version {
		return nil, "", "", fmt.Errorf("%s.version is %s but the bundle %s holds %s", agent, pin, cfg.Bundle, ent.Version)
	}
	if ent.Platform != target {
		return nil, "", "", fmt.Errorf("the bundle %s holds %s for %s, but this system is %s (make the bundle on this system, or with its platform)", cfg.Bundle, agent, ent.Platform, target)
	}
	return b, ent.Version, "", nil
}

// lazyBundle opens (and checks) a bundle once, on first use.
type lazyBundle struct {
	path string
	once sync.Once
	b    *bundleSource
	err  error
}

func (l *lazyBundle) get() (*bundleSource, error) {
	l.once.Do(func() { l.b, l.err = openBundle(l.path) })
	return l.b, l.err
}
