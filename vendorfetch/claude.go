package vendorfetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/vendorfetch/extract"
)

// claudeManifest is <ver>/manifest.json.
type claudeManifest struct {
	Version   string `json:"version"`
	BuildDate string `json:"buildDate"`
	Platforms map[string]struct {
		Binary   string `json:"binary"`
		Checksum string `json:"checksum"`
		Size     int64  `json:"size"`
	} `json:"platforms"`
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// claudeRelease is a fetched and verified Claude Code binary.
type claudeRelease struct {
	version, platform string
	manifest, sig     []byte
	checksum          string
	size              int64
	url               string // where the bytes came from
	verified          string // what was checked, for the report
	// warnings name copies that failed verification before this one.
	warnings []string
}

// resolveClaude names the version to install: the pin, or the channel's
// current version (one small request).
func resolveClaude(ctx context.Context, src source, cfg Config) (string, error) {
	if cfg.Claude.Version != "" {
		return cfg.Claude.Version, nil
	}
	u := strings.TrimRight(cfg.Claude.BaseURL, "/") + "/" + cfg.Claude.Channel
	b, err := src.small(ctx, u)
	if err != nil {
		return "", fmt.Errorf("resolving the %s channel: %w", cfg.Claude.Channel, err)
	}
	v := strings.TrimSpace(string(b))
	if err := CheckVersion(u, v); err != nil {
		return "", err
	}
	return v, nil
}

// fetchClaude downloads version's manifest (and signature), then the
// binary for platform, and leaves it in dir as "claude", mode 0755, only
// once its size and sha256 match the (verified) manifest.
func fetchClaude(ctx context.Context, src source, cfg Config, sg *signer, version, platform string, dir *os.File, found []adoptable) (*claudeRelease, error) {
	base := strings.TrimRight(cfg.Claude.BaseURL, "/") + "/" + version
	rel := &claudeRelease{version: version, platform: platform}
	if sg != nil && compareVersions(version, FirstSignedClaude) < 0 {
		return nil, fmt.Errorf("version %s is older than %s, the first with a signed manifest, and claude.signing_key is set: refusing to install it unsigned (pin %s or later, or unset claude.signing_key)", version, FirstSignedClaude, FirstSignedClaude)
	}
	var err error
	if rel.manifest, err = src.small(ctx, base+"/manifest.json"); err != nil {
		var nf *NotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("version %s does not exist at %s (no manifest.json: HTTP 404)", version, base)
		}
		return nil, fmt.Errorf("fetching the manifest: %w", err)
	}
	rel.verified = "sha256 only (no signing key could be had, so the manifest's signature was not checked)"
	if sg != nil {
		if rel.sig, err = src.small(ctx, base+"/manifest.json.sig"); err != nil {
			var nf *NotFoundError
			if errors.As(err, &nf) {
				return nil, fmt.Errorf("%s/manifest.json.sig is missing and claude.signing_key is set: refusing the unsigned release", base)
			}
			return nil, fmt.Errorf("fetching the manifest's signature: %w", err)
		}
		if err := sg.verify(rel.manifest, rel.sig, base+"/manifest.json"); err != nil {
			return nil, err
		}
		rel.verified = "sha256 and the manifest's OpenPGP signature (key " + sg.fingerprint + ")"
	}
	var m claudeManifest
	if err := json.Unmarshal(rel.manifest, &m); err != nil {
		return nil, fmt.Errorf("%s/manifest.json does not parse: %v", base, err)
	}
	if m.Version != version {
		return nil, fmt.Errorf("%s/manifest.json is for version %q, not %s", base, m.Version, version)
	}
	p, ok := m.Platforms[platform]
	if !ok {
		return nil, fmt.Errorf("%s/manifest.json has no %s build", base, platform)
	}
	if !sha256RE.MatchString(p.Checksum) || p.Size <= 0 {
		return nil, fmt.Errorf("%s/manifest.json: the %s entry has no valid checksum and size", base, platform)
	}
	if p.Binary != "" && p.Binary != "claude" {
		return nil, fmt.Errorf("%s/manifest.json names the binary %q, not claude", base, p.Binary)
	}
	rel.checksum, rel.size = p.Checksum, p.Size
	// dir becomes the installed version directory: nothing but the
	// verified binary may stay in it.
	defer func() {
		unix.Unlinkat(int(dir.Fd()), "claude.zst.partial", 0)
		unix.Unlinkat(int(dir.Fd()), "claude.partial", 0)
	}()
	for _, a := range found {
		err := adopt(a, rel, dir)
		if err == nil {
			rel.url = "adopted " + a.name
			return rel, nil
		}
		if strings.Contains(err.Error(), "mismatch") {
			// A copy in a home that is not the release: loud, even though
			// the download then installs the right bytes.
			rel.warnings = append(rel.warnings, fmt.Sprintf("claude: the copy at %s failed verification (%v); the release was downloaded instead", a.name, err))
		}
		unix.Unlinkat(int(dir.Fd()), "claude.partial", 0)
	}
	bin := base + "/" + platform + "/claude"
	if err := fetchClaudeZst(ctx, src, cfg, bin+".zst", rel, dir); err == nil {
		rel.url = bin + ".zst"
	} else {
		var nf *NotFoundError
		if !errors.As(err, &nf) {
			return nil, err
		}
		if err := fetchPlain(ctx, src, bin, rel, dir); err != nil {
			return nil, err
		}
		rel.url = bin
	}
	return rel, nil
}

// fetchPlain downloads the bare binary through the hash.
func fetchPlain(ctx context.Context, src source, url string, rel *claudeRelease, dir *os.File) error {
	f, err := createIn(dir, "claude.partial", 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := src.download(ctx, url, f, h, rel.size)
	if err != nil {
		return err
	}
	return finishBinary(f, dir, url, rel, n, hex.EncodeToString(h.Sum(nil)))
}

// fetchClaudeZst downloads the zstd copy and decompresses it through the
// hash: the manifest's checksum is of the decompressed bytes. A missing
// .zst is a NotFoundError, so the caller falls back to the plain binary.
func fetchClaudeZst(ctx context.Context, src source, cfg Config, url string, rel *claudeRelease, dir *os.File) error {
	zf, err := createIn(dir, "claude.zst.partial", 0o600)
	if err != nil {
		return err
	}
	defer zf.Close()
	// Incompressible data grows a little under zstd; anything beyond that
	// is not the binary the manifest describes.
	if _, err := src.download(ctx, url, zf, sha256.New(), rel.size+rel.size/64+1<<16); err != nil {
		return err
	}
	if _, err := zf.Seek(0, io.SeekStart); err != nil {
		return err
	}
	zr, err := extract.NewZstdReader(zf)
	if err != nil {
		return err
	}
	defer zr.Close()
	f, err := createIn(dir, "claude.partial", 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(f, h), io.LimitReader(zr, rel.size+1), make([]byte, 256<<10))
	if err != nil {
		return fmt.Errorf("decompressing %s: %w", url, err)
	}
	return finishBinary(f, dir, url, rel, n, hex.EncodeToString(h.Sum(nil)))
}

// finishBinary checks size and checksum and only then names the file claude.
func finishBinary(f *os.File, dir *os.File, url string, rel *claudeRelease, n int64, sum string) error {
	if n != rel.size {
		return fmt.Errorf("%s: %d bytes, but the manifest says %d (size mismatch): refusing it", url, n, rel.size)
	}
	if sum != rel.checksum {
		return fmt.Errorf("%s: sha256 %s, but the manifest says %s (checksum mismatch): refusing it", url, sum, rel.checksum)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Chmod(0o755); err != nil {
		return err
	}
	return renameIn(dir, "claude.partial", "claude")
}

// claudeStep installs Claude Code under /usr/libexec/cco/claude.
type claudeStep struct{ cfg Config }

// claudePlan is what Check learned for Apply.
type claudePlan struct {
	version, platform string
	src               source
}

func (s *claudeStep) ID() string   { return StepClaude }
func (s *claudeStep) Name() string { return "install Claude Code (" + ClaudeDir + ")" }

func (s *claudeStep) Check(run *provision.View) (provision.Check, error) {
	cfg := s.cfg
	c := provision.Check{Paths: []string{ClaudeDir + "/current"}}
	platform := cfg.Platform
	if platform == "" {
		var err error
		if platform, err = DetectPlatform(run.Root); err != nil {
			return c, fmt.Errorf("claude: %w", err)
		}
	}
	st := loadState(run, StepClaude)
	src, pin, channel, err := agentSource(cfg, AgentClaude, platform)
	if err != nil {
		return c, fmt.Errorf("claude: %w", err)
	}
	upgrade := cfg.Upgrade[AgentClaude]
	if st != nil && !upgrade && st.Platform == platform && (pin == st.Version || pin == "" && st.Channel == channel) {
		ok, why := intact(run, StepClaude, ClaudeDir, st.Version)
		c.Installed = st.Version
		if ok {
			c.State, c.Detail = provision.Done, fmt.Sprintf("claude %s is installed (%s)", st.Version, platform)
			if pin == "" && cfg.Bundle == "" {
				ccfg := cfg
				ccfg.Claude.Channel, ccfg.Retries = channel, 0
				var warns []string
				c.Available, warns = newerNotice(run.Ctx, AgentClaude, channel, st.Version, func(ctx context.Context) (string, error) {
					return resolveClaude(ctx, src, ccfg)
				})
				c.Warnings = append(c.Warnings, warns...)
			}
			return c, nil
		}
		c.State, c.Detail = provision.ToDo, fmt.Sprintf("reinstall claude %s: %s", st.Version, why)
		c.Data = &claudePlan{version: st.Version, platform: platform, src: src}
		return c, nil
	}
	if run.Status {
		return notInstalled(c, AgentClaude, st, pin, channel), nil
	}
	ccfg := cfg
	ccfg.Claude.Version = pin
	ccfg.Claude.Channel = channel
	v, err := resolveClaude(run.Ctx, src, ccfg)
	if err != nil {
		return c, fmt.Errorf("claude: %w", err)
	}
	if err := forwardOnly(cfg, AgentClaude, st, pin, v); err != nil {
		return c, err
	}
	if st != nil && st.Version == v && st.Platform == platform {
		if ok, _ := intact(run, StepClaude, ClaudeDir, v); ok {
			c.State, c.Detail = provision.Done, fmt.Sprintf("claude %s is installed and is the newest on the %s channel", v, channel)
			if pin != "" {
				c.Detail = fmt.Sprintf("claude %s is installed (pinned)", v)
			}
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
	c.State = provision.ToDo
	c.Detail = fmt.Sprintf("install claude %s (%s, %s)", v, platform, from)
	if st != nil && st.Version != v {
		c.Detail = fmt.Sprintf("upgrade claude %s -> %s (%s, %s)", st.Version, v, platform, from)
	}
	c.Data = &claudePlan{version: v, platform: platform, src: src}
	return c, nil
}

func (s *claudeStep) Apply(run *provision.Run, c provision.Check) (string, error) {
	p, ok := c.Data.(*claudePlan)
	if !ok {
		return "", fmt.Errorf("claude: no plan from the check")
	}
	cfg := s.cfg
	if cfg.Bundle != "" {
		cfg.Claude.BaseURL = bundleClaudeBase
	}
	sg, err := loadSigner(cfg.Claude.SigningKey, cfg.Claude.SigningFingerprint)
	if err != nil {
		return "", fmt.Errorf("claude: %w", err)
	}
	prev := loadState(&run.View, StepClaude)
	var keyBytes []byte
	noKey := ""
	if cfg.Claude.SigningKey == "" && compareVersions(p.version, FirstSignedClaude) >= 0 {
		if sg, keyBytes, noKey, err = defaultSigner(run.Ctx, &run.View, p.src, cfg); err != nil {
			return "", fmt.Errorf("claude: %w", err)
		}
		if noKey != "" && (prev == nil || prev.NoKey != noKey) {
			run.Warn("claude: only the sha256 checksum is verified: " + noKey + "; set claude.signing_key to an armored copy of the vendor's key (fingerprint " + cfg.Claude.SigningFingerprint + ")")
		}
	}
	sgd, err := newStaging(run, AgentClaude, StepClaude)
	if err != nil {
		return "", fmt.Errorf("claude: %w", err)
	}
	defer sgd.close()
	vdir, err := subdir(sgd.dir, "version")
	if err != nil {
		return "", fmt.Errorf("claude: %w", err)
	}
	defer vdir.Close()
	var found []adoptable
	if cfg.AdoptExisting {
		found = adoptCandidates(run, cfg.Users, p.version)
	}
	rel, err := fetchClaude(run.Ctx, p.src, cfg, sg, p.version, p.platform, vdir, found)
	if err != nil {
		return "", fmt.Errorf("claude %s: %w", p.version, err)
	}
	for _, w := range rel.warnings {
		run.Warn(w)
	}
	if keyBytes != nil {
		if err := cacheKey(run, keyBytes); err != nil {
			run.Warn("claude: the vendor's key was not cached: " + err.Error())
		}
	}
	if err := sgd.place(StepClaude, ClaudeDir, p.version, "version"); err != nil {
		return "", fmt.Errorf("claude %s: %w", p.version, err)
	}
	bin := ClaudeDir + "/" + p.version + "/claude"
	if err := run.Record(bin, provision.KindFile, rel.checksum, StepClaude); err != nil {
		return "", fmt.Errorf("claude %s: %w", p.version, err)
	}
	st := &agentState{Version: p.version, Platform: p.platform, Source: sourceName(cfg, rel.url), Verified: rel.verified, NoKey: noKey}
	if cfg.Claude.Version == "" && cfg.Bundle == "" {
		st.Channel = cfg.Claude.Channel
	}
	if prev != nil && prev.Version != p.version {
		st.Previous = prev.Version
	}
	if err := saveState(run, StepClaude, st); err != nil {
		return "", err
	}
	return fmt.Sprintf("installed claude %s (%s) from %s; verified %s", p.version, p.platform, sourceName(cfg, rel.url), rel.verified) + prune(run, StepClaude, ClaudeDir, st), nil
}

// cacheKey keeps the vendor's key (already matched to the fingerprint)
// under /var/lib/cco, owned by the receipt like any file cco writes.
func cacheKey(run *provision.Run, b []byte) error {
	if err := run.MkdirAll(path.Dir(KeyCachePath), 0o755, StepClaude); err != nil {
		return err
	}
	if err := run.Root.WriteFile(KeyCachePath, bytes.NewReader(b), 0o644, provision.SystemUID(), provision.SystemGID()); err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	return run.Record(KeyCachePath, provision.KindFile, hex.EncodeToString(sum[:]), StepClaude)
}
