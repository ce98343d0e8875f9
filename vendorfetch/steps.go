package vendorfetch

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/vendorfetch/extract"
)

// Steps are the provision steps that install the agents of cfg.Agents:
// vendor.claude and vendor.codex, each on its own so that one agent's
// failure never costs the other.
func Steps(cfg Config) []provision.Step {
	cfg = cfg.withDefaults()
	if cfg.Bundle != "" {
		// Both steps read one bundle: check it once.
		cfg.bundle = &lazyBundle{path: cfg.Bundle}
	}
	var out []provision.Step
	for _, a := range cfg.Agents {
		switch a {
		case AgentClaude:
			out = append(out, &claudeStep{cfg: cfg})
		case AgentCodex:
			out = append(out, &codexStep{cfg: cfg})
		}
	}
	return out
}

// agentSource is where agent's release comes from, with the version
// pinned (by configuration or by the bundle) and the channel otherwise.
func agentSource(cfg Config, agent, platform string) (source, string, string, error) {
	pin, channel := cfg.Claude.Version, cfg.Claude.Channel
	if agent == AgentCodex {
		pin, channel = cfg.Codex.Version, cfg.Codex.Channel
	}
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
	want := platform
	if agent == AgentCodex {
		want = codexTarget(platform)
	}
	if ent.Platform != want {
		return nil, "", "", fmt.Errorf("the bundle %s holds %s for %s, but this system is %s (make the bundle with platform %s)", cfg.Bundle, agent, ent.Platform, want, platform)
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

// codexStep installs Codex's package tree under /usr/libexec/cco/codex-dist.
type codexStep struct{ cfg Config }

type codexPlan struct {
	version, target string
	digests         map[string]string
	src             source
}

func (s *codexStep) ID() string   { return StepCodex }
func (s *codexStep) Name() string { return "install Codex (" + CodexDir + ")" }

func (s *codexStep) Check(run *provision.View) (provision.Check, error) {
	cfg := s.cfg
	c := provision.Check{Paths: []string{CodexDir + "/current"}}
	platform := cfg.Platform
	if platform == "" {
		var err error
		if platform, err = DetectPlatform(run.Root); err != nil {
			return c, fmt.Errorf("codex: %w", err)
		}
	}
	target := codexTarget(platform)
	src, pin, channel, err := agentSource(cfg, AgentCodex, platform)
	if err != nil {
		return c, fmt.Errorf("codex: %w", err)
	}
	st := loadState(run, StepCodex)
	if st != nil && !cfg.Upgrade[AgentCodex] && st.Platform == target && (pin == st.Version || pin == "" && st.Channel == channel) {
		ok, why := intact(run, StepCodex, CodexDir, st.Version)
		c.Installed = st.Version
		if ok {
			c.State, c.Detail = provision.Done, fmt.Sprintf("codex %s is installed (%s)", st.Version, target)
			if pin == "" && cfg.Bundle == "" {
				ccfg := cfg
				ccfg.Codex.Channel, ccfg.Retries, ccfg.Codex.GitHubAPIURL = channel, 0, ""
				var warns []string
				c.Available, warns = newerNotice(run.Ctx, AgentCodex, channel, st.Version, func(ctx context.Context) (string, error) {
					v, _, err := resolveCodex(ctx, src, ccfg)
					return v, err
				})
				c.Warnings = append(c.Warnings, warns...)
			}
			return c, nil
		}
		c.State, c.Detail = provision.ToDo, fmt.Sprintf("reinstall codex %s: %s", st.Version, why)
		c.Data = &codexPlan{version: st.Version, target: target, src: src}
		return c, nil
	}
	if run.Status {
		return notInstalled(c, AgentCodex, st, pin, channel), nil
	}
	ccfg := cfg
	ccfg.Codex.Version, ccfg.Codex.Channel = pin, channel
	if cfg.Bundle != "" {
		ccfg.Codex.BaseURLs, ccfg.Codex.GitHubAPIURL = []string{bundleCodexBase}, ""
	}
	v, digests, err := resolveCodex(run.Ctx, src, ccfg)
	if err != nil {
		return c, fmt.Errorf("codex: %w", err)
	}
	if err := forwardOnly(cfg, AgentCodex, st, pin, v); err != nil {
		return c, err
	}
	if st != nil && st.Version == v && st.Platform == target {
		if ok, _ := intact(run, StepCodex, CodexDir, v); ok {
			c.State, c.Detail = provision.Done, fmt.Sprintf("codex %s is installed and is the newest", v)
			return c, nil
		}
	}
	from := "pinned"
	if pin == "" {
		from = "the " + channel + " channel"
	}
	if cfg.Bundle != "" {
		from = "the bundle " + cfg.Bundle
	}
	c.State, c.Detail = provision.ToDo, fmt.Sprintf("install codex %s (%s, %s)", v, target, from)
	if st != nil && st.Version != v {
		c.Detail = fmt.Sprintf("upgrade codex %s -> %s (%s, %s)", st.Version, v, target, from)
	}
	c.Data = &codexPlan{version: v, target: target, digests: digests, src: src}
	return c, nil
}

func (s *codexStep) Apply(run *provision.Run, c provision.Check) (string, error) {
	p, ok := c.Data.(*codexPlan)
	if !ok {
		return "", fmt.Errorf("codex: no plan from the check")
	}
	cfg := s.cfg
	if cfg.Bundle != "" {
		cfg.Codex.BaseURLs, cfg.Codex.GitHubBaseURL, cfg.Codex.GitHubAPIURL = []string{bundleCodexBase}, "", ""
	}
	sgd, err := newStaging(run, AgentCodex, StepCodex)
	if err != nil {
		return "", fmt.Errorf("codex: %w", err)
	}
	defer sgd.close()
	rel, err := fetchCodex(run.Ctx, p.src, cfg, p.version, p.target, p.digests, sgd.dir)
	if err != nil {
		return "", fmt.Errorf("codex %s: %w", p.version, err)
	}
	for _, w := range rel.warnings {
		run.Warn(w)
	}
	res, err := unpackCodex(sgd, rel, cfg.UnpackLimit)
	if err != nil {
		return "", fmt.Errorf("codex %s: %w", p.version, err)
	}
	prev := loadState(&run.View, StepCodex)
	if err := sgd.place(StepCodex, CodexDir, p.version, "version"); err != nil {
		return "", fmt.Errorf("codex %s: %w", p.version, err)
	}
	vdir := CodexDir + "/" + p.version
	for _, m := range res.Members {
		t := vdir + "/" + m.Name
		switch m.Kind {
		case extract.KindDir:
			run.Receipt.Dirs[t] = provision.DirRecord{Step: StepCodex}
		case extract.KindFile:
			err = run.Record(t, provision.KindFile, m.SHA256, StepCodex)
		case extract.KindLink:
			err = run.Record(t, provision.KindLink, "", StepCodex)
		}
		if err != nil {
			return "", fmt.Errorf("codex %s: %w", p.version, err)
		}
	}
	st := &agentState{Version: p.version, Platform: p.target, Channel: "", Source: sourceName(cfg, rel.url), Verified: "sha256 against " + SumsAsset}
	if cfg.Codex.Version == "" && cfg.Bundle == "" {
		st.Channel = cfg.Codex.Channel
	}
	if prev != nil && prev.Version != p.version {
		st.Previous = prev.Version
	}
	if err := saveState(run, StepCodex, st); err != nil {
		return "", err
	}
	detail := fmt.Sprintf("installed codex %s (%s) from %s; verified sha256 against %s", p.version, p.target, sourceName(cfg, rel.url), SumsAsset)
	detail += prune(run, StepCodex, CodexDir, st)
	if len(res.Stripped) > 0 {
		detail += "; stripped setuid/setgid bits from " + strings.Join(res.Stripped, ", ")
	}
	return detail, nil
}

// unpackCodex extracts the verified archive into the staging directory's
// "version" directory and validates the tree.
func unpackCodex(sgd *staging, rel *codexRelease, limit int64) (*extract.Result, error) {
	f, err := openIn(sgd.dir, "package")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vdir, err := subdir(sgd.dir, "version")
	if err != nil {
		return nil, err
	}
	defer vdir.Close()
	res, err := extract.Extract(f, vdir, limit)
	if err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", rel.asset, err)
	}
	files := map[string]memberInfo{}
	for _, m := range res.Members {
		files[m.Name] = memberInfo{kind: m.Kind, mode: uint32(m.Mode.Perm())}
	}
	if err := validateCodexTree(vdir, files, rel.version, rel.target); err != nil {
		return nil, fmt.Errorf("%s: %w", rel.asset, err)
	}
	return res, nil
}
