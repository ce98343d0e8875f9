package vendorfetch

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/vendorfetch/extract"
)

// SumsAsset is the checksum file of a Codex release.
const SumsAsset = "codex-package_SHA256SUMS"

// codexStore is one place a Codex release can come from.
type codexStore struct {
	name  string // for messages: its base URL
	base  string // <base>/<asset> is an asset of the version
	isGit bool   // the GitHub layout: the API's digests may stand in for SHA256SUMS
}

func codexStores(cfg Config, version string) []codexStore {
	var out []codexStore
	for _, b := range cfg.Codex.BaseURLs {
		b = strings.TrimRight(b, "/")
		out = append(out, codexStore{name: b, base: b + "/releases/" + version})
	}
	if g := strings.TrimRight(cfg.Codex.GitHubBaseURL, "/"); g != "" {
		out = append(out, codexStore{name: g, base: g + "/rust-v" + version, isGit: true})
	}
	return out
}

// parseCodexVersion reads channels/latest or the GitHub API's answer: plain
// text, or JSON with a tag field; a leading rust-v or v is stripped.
func parseCodexVersion(where string, b []byte) (string, map[string]string, error) {
	b = bytes.TrimSpace(b)
	v := string(b)
	digests := map[string]string{}
	if bytes.HasPrefix(b, []byte("{")) {
		var doc struct {
			TagName string `json:"tag_name"`
			Tag     string `json:"tag"`
			Version string `json:"version"`
			Latest  string `json:"latest"`
			Assets  []struct {
				Name   string `json:"name"`
				Digest string `json:"digest"`
			} `json:"assets"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return "", nil, fmt.Errorf("%s: not a version and not JSON: %v", where, err)
		}
		v = doc.TagName
		for _, alt := range []string{doc.Tag, doc.Version, doc.Latest} {
			if v == "" {
				v = alt
			}
		}
		for _, a := range doc.Assets {
			if d, ok := strings.CutPrefix(a.Digest, "sha256:"); ok && sha256RE.MatchString(d) {
				digests[a.Name] = d
			}
		}
	} else if i := strings.IndexByte(v, '\n'); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	if s, ok := strings.CutPrefix(v, "rust-v"); ok {
		v = s
	} else if s, ok := strings.CutPrefix(v, "v"); ok {
		v = s
	}
	if err := CheckVersion(where, v); err != nil {
		return "", nil, err
	}
	return v, digests, nil
}

// resolveCodex names the version: the pin, else the first store's
// channels/latest that answers, else the GitHub API.
func resolveCodex(ctx context.Context, src source, cfg Config) (string, map[string]string, error) {
	if cfg.Codex.Version != "" {
		return cfg.Codex.Version, nil, nil
	}
	var errs []string
	for _, b := range cfg.Codex.BaseURLs {
		u := strings.TrimRight(b, "/") + "/channels/" + cfg.Codex.Channel
		body, err := src.small(ctx, u)
		if err == nil {
			var v string
			if v, _, err = parseCodexVersion(u, body); err == nil {
				return v, nil, nil
			}
		}
		errs = append(errs, err.Error())
	}
	if api := cfg.Codex.GitHubAPIURL; api != "" {
		body, err := src.small(ctx, api)
		if err == nil {
			var v string
			var digests map[string]string
			if v, digests, err = parseCodexVersion(api, body); err == nil {
				return v, digests, nil
			}
		}
		errs = append(errs, err.Error())
	}
	if len(errs) == 0 {
		return "", nil, errors.New("no store is configured (codex.base_urls and codex.github_api_url are empty)")
	}
	return "", nil, fmt.Errorf("resolving the %s channel: %s", cfg.Codex.Channel, strings.Join(errs, "; "))
}

// pickSum finds the one line of sums for asset.
func pickSum(sums []byte, asset string) (string, int) {
	var sum string
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && strings.TrimPrefix(f[1], "*") == asset {
			sum = strings.ToLower(f[0])
			n++
		}
	}
	return sum, n
}

// codexRelease is a fetched and verified Codex package archive.
type codexRelease struct {
	version, target, asset string
	sums                   []byte
	checksum               string
	// warnings name stores whose bytes failed verification before this one.
	warnings []string
	url      string
}

// fetchCodex downloads version's package for target from the first store
// that serves it intact, leaving it in dir as "package". The archive is
// verified against exactly one line of codex-package_SHA256SUMS (the
// .tar.zst when the release lists it, else the .tar.gz).
func fetchCodex(ctx context.Context, src source, cfg Config, version, target string, digests map[string]string, dir *os.File) (*codexRelease, error) {
	var errs []string
	allMissing := true
	var integrity []string
	for _, st := range codexStores(cfg, version) {
		rel, err := fetchCodexFrom(ctx, src, cfg, st, version, target, digests, dir)
		if err == nil {
			// A store that served bad bytes is loud even when another
			// then served good ones: it is broken or attacked.
			rel.warnings = integrity
			return rel, nil
		}
		if strings.Contains(err.Error(), "mismatch") {
			integrity = append(integrity, fmt.Sprintf("codex: %s served bytes that failed verification (%v); another store's copy was used", st.name, err))
		}
		unix.Unlinkat(int(dir.Fd()), "package.partial", 0)
		var nf *NotFoundError
		if !errors.As(err, &nf) {
			allMissing = false
		}
		errs = append(errs, fmt.Sprintf("%s: %v", st.name, err))
	}
	if len(errs) == 0 {
		return nil, errors.New("no store is configured (codex.base_urls and codex.github_base_url are empty)")
	}
	if allMissing {
		return nil, fmt.Errorf("version %s does not exist at any store (%s)", version, strings.Join(errs, "; "))
	}
	return nil, errors.New(strings.Join(errs, "; "))
}

func fetchCodexFrom(ctx context.Context, src source, cfg Config, st codexStore, version, target string, digests map[string]string, dir *os.File) (*codexRelease, error) {
	rel := &codexRelease{version: version, target: target}
	sumsURL := st.base + "/" + SumsAsset
	sums, err := src.small(ctx, sumsURL)
	var nf *NotFoundError
	if errors.As(err, &nf) && st.isGit && len(digests) > 0 {
		// The GitHub API's per-asset digests stand in for a missing sums file.
		var b strings.Builder
		for name, d := range digests {
			fmt.Fprintf(&b, "%s  %s\n", d, name)
		}
		sums, err = []byte(b.String()), nil
	}
	if err != nil {
		return nil, err
	}
	rel.sums = sums
	for _, ext := range []string{".tar.zst", ".tar.gz"} {
		name := "codex-package-" + target + ext
		sum, n := pickSum(sums, name)
		if n == 0 {
			continue
		}
		if n > 1 {
			return nil, fmt.Errorf("%s lists %s %d times: refusing the ambiguous checksum", sumsURL, name, n)
		}
		if !sha256RE.MatchString(sum) {
			return nil, fmt.Errorf("%s: the checksum %q of %s is not a sha256", sumsURL, sum, name)
		}
		rel.asset, rel.checksum = name, sum
		break
	}
	if rel.asset == "" {
		return nil, fmt.Errorf("%s has no line for codex-package-%s.tar.zst or .tar.gz", sumsURL, target)
	}
	rel.url = st.base + "/" + rel.asset
	f, err := createIn(dir, "package.partial", 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	limit := cfg.UnpackLimit
	if limit <= 0 {
		limit = DefaultConfig().UnpackLimit
	}
	// The archive's size is not published; the unpack limit bounds it, so
	// a hostile store cannot fill the disk.
	if _, err := src.download(ctx, rel.url, f, h, limit); err != nil {
		return nil, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != rel.checksum {
		return nil, fmt.Errorf("%s: sha256 %s, but %s says %s (checksum mismatch): refusing it", rel.url, got, SumsAsset, rel.checksum)
	}
	if err := renameIn(dir, "package.partial", "package"); err != nil {
		return nil, err
	}
	return rel, nil
}

// codexPackage is codex-package.json.
type codexPackage struct {
	LayoutVersion int    `json:"layoutVersion"`
	Version       string `json:"version"`
	Target        string `json:"target"`
	Entrypoint    string `json:"entrypoint"`
}

// validateCodexTree checks the unpacked package: codex-package.json with
// layoutVersion 1 and the resolved version (and target), and its
// entrypoint a regular executable file of the tree.
func validateCodexTree(dir *os.File, files map[string]memberInfo, version, target string) error {
	var p codexPackage
	var pe *fs.PathError
	if err := readJSONIn(dir, "codex-package.json", &p); errors.As(err, &pe) {
		return fmt.Errorf("the package has no codex-package.json at its top: not a Codex standalone package")
	} else if err != nil {
		return err
	}
	if p.LayoutVersion != 1 {
		return fmt.Errorf("codex-package.json has layoutVersion %d; this cco knows layout 1 (use a newer cco-install)", p.LayoutVersion)
	}
	v := strings.TrimPrefix(strings.TrimPrefix(p.Version, "rust-v"), "v")
	if v != version {
		return fmt.Errorf("codex-package.json is version %q, not the resolved %s", p.Version, version)
	}
	if p.Target != "" && p.Target != target {
		return fmt.Errorf("codex-package.json is for %q, not %s", p.Target, target)
	}
	if p.Entrypoint == "" {
		return errors.New("codex-package.json names no entrypoint")
	}
	ep := strings.TrimPrefix(p.Entrypoint, "./")
	m, ok := files[ep]
	if !ok || m.kind != "file" {
		return fmt.Errorf("the entrypoint %q is not a file of the package", p.Entrypoint)
	}
	if m.mode&0o111 == 0 {
		return fmt.Errorf("the entrypoint %q is not executable (mode %04o)", p.Entrypoint, m.mode)
	}
	return nil
}

// codexSource is Codex's release stores, in order, then the GitHub layout
// (or the bundle's copy) as a release source.
type codexSource struct{ cfg Config }

func (c *codexSource) target(platform string) string { return codexTarget(platform) }

func (c *codexSource) resolve(ctx context.Context, _ *provision.View, tr source, pin, channel, _ string) (string, *resolved, error) {
	cfg := c.cfg
	cfg.Codex.Version, cfg.Codex.Channel = pin, channel
	v, digests, err := resolveCodex(ctx, tr, cfg)
	return v, &resolved{digests: digests}, err
}

// fetch verifies the archive against one line of the release's SHA256SUMS
// and unpacks it into the version directory.
func (c *codexSource) fetch(run *provision.Run, p *vendorPlan, sgd *staging) (*fetched, error) {
	var digests map[string]string
	if p.res != nil {
		digests = p.res.digests
	}
	rel, err := fetchCodex(run.Ctx, p.tr, c.cfg, p.version, p.target, digests, sgd.dir)
	if err != nil {
		return nil, err
	}
	res, err := unpackCodex(sgd, rel, c.cfg.UnpackLimit)
	if err != nil {
		return nil, err
	}
	return &fetched{url: rel.url, verified: "sha256 against " + SumsAsset, members: res.Members, stripped: res.Stripped, warnings: rel.warnings}, nil
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
	if err := validateCodexTree(vdir, memberInfos(res.Members), rel.version, rel.target); err != nil {
		return nil, fmt.Errorf("%s: %w", rel.asset, err)
	}
	return res, nil
}

func memberInfos(ms []extract.Member) map[string]memberInfo {
	files := map[string]memberInfo{}
	for _, m := range ms {
		files[m.Name] = memberInfo{kind: m.Kind, mode: uint32(m.Mode.Perm())}
	}
	return files
}

// readJSONIn parses the small JSON file name of dir into v; a file that
// cannot be opened is an *fs.PathError.
func readJSONIn(dir *os.File, name string, v any) error {
	f, err := openIn(dir, name)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSmall))
	if err != nil {
		return fmt.Errorf("reading %s: %v", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s does not parse: %v", name, err)
	}
	return nil
}

type memberInfo struct {
	kind string
	mode uint32
}

// AgentCodex is the agent table's name for this vendor.
const AgentCodex = "codex"

// CodexDir holds Codex's versions (each its standalone package tree) on the
// target system.
const CodexDir = LibexecDir + "/codex-dist"
