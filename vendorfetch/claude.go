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

// claudeStore is Claude Code's release store (or a mirror of it, or the
// bundle's copy) as a release source.
type claudeStore struct{ cfg Config }

func (c *claudeStore) target(platform string) string { return platform }

func (c *claudeStore) resolve(ctx context.Context, _ *provision.View, tr source, pin, channel, _ string) (string, *resolved, error) {
	cfg := c.cfg
	cfg.Claude.Version, cfg.Claude.Channel = pin, channel
	v, err := resolveClaude(ctx, tr, cfg)
	return v, nil, err
}

// fetch verifies the manifest (its OpenPGP signature by default, from
// FirstSignedClaude on) and the binary against it.
func (c *claudeStore) fetch(run *provision.Run, p *vendorPlan, sgd *staging) (*fetched, error) {
	cfg := c.cfg
	sg, err := loadSigner(cfg.Claude.SigningKey, cfg.Claude.SigningFingerprint)
	if err != nil {
		return nil, err
	}
	prev := loadState(&run.View, StepClaude)
	var keyBytes []byte
	f := &fetched{}
	if cfg.Claude.SigningKey == "" && compareVersions(p.version, FirstSignedClaude) >= 0 {
		if sg, keyBytes, f.noKey, err = defaultSigner(run.Ctx, &run.View, p.tr, cfg); err != nil {
			return nil, err
		}
		if f.noKey != "" && (prev == nil || prev.NoKey != f.noKey) {
			f.warnings = append(f.warnings, "claude: only the sha256 checksum is verified: "+f.noKey+"; set claude.signing_key to an armored copy of the vendor's key (fingerprint "+cfg.Claude.SigningFingerprint+")")
		}
	}
	vdir, err := subdir(sgd.dir, "version")
	if err != nil {
		return nil, err
	}
	defer vdir.Close()
	var found []adoptable
	if cfg.AdoptExisting {
		found = adoptCandidates(run, cfg.Users, p.version)
	}
	rel, err := fetchClaude(run.Ctx, p.tr, cfg, sg, p.version, p.platform, vdir, found)
	if err != nil {
		return nil, err
	}
	f.warnings = append(f.warnings, rel.warnings...)
	if keyBytes != nil {
		if err := cacheKey(run, keyBytes); err != nil {
			f.warnings = append(f.warnings, "claude: the vendor's key was not cached: "+err.Error())
		}
	}
	f.url, f.verified = rel.url, rel.verified
	f.members = []extract.Member{{Name: "claude", Kind: extract.KindFile, SHA256: rel.checksum}}
	return f, nil
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
	return run.Record(KeyCachePath, provision.KindFile, sha256Hex(b), StepClaude)
}

// AgentClaude is the agent table's name for this vendor.
const AgentClaude = "claude"

// ClaudeDir holds Claude Code's versions on the target system.
const ClaudeDir = LibexecDir + "/claude"

// claudeEntry is the native binary's name in the store's tree and the npm package.
const claudeEntry = "claude"

// validateClaudeTree checks the npm build's binary as the store's is
// checked: a regular, executable file named claude.
func validateClaudeTree(_ *os.File, files map[string]memberInfo, _, _ string) error {
	m, ok := files[claudeEntry]
	if !ok || m.kind != extract.KindFile {
		return errors.New("the package has no claude binary")
	}
	if m.mode&0o111 == 0 {
		return fmt.Errorf("claude is not executable (mode %04o)", m.mode)
	}
	return nil
}
