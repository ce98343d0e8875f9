package vendorfetch

import (
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/vendorfetch/extract"
)

// maxPackument bounds a packument: the full document of a package with
// thousands of versions is megabytes, never this.
const maxPackument = 64 << 20

// npmLayout is how an agent's release sits in its npm package.
type npmLayout struct {
	pkg string // the package whose dist-tags are the channels
	// platformKey names the optional dependency that holds the build for
	// a target ("" = the package itself holds it).
	platformKey func(target string) string
	// sub is the directory of the tarball that becomes the version
	// directory; only, when set, keeps just these files of it.
	sub  func(target string) string
	only []string
	// validate checks the version directory's tree.
	validate func(vdir *os.File, files map[string]memberInfo, version, target string) error
	node     bool // the package is a Node program: engines.node must hold
	target   func(platform string) string
	// native: the version is the platform package's own (npmnative.go).
	native bool
	// tree: a Node program installed with the whole dependency tree that
	// npm resolves for it, each package verified and unpacked by cco
	// (npmtree.go).
	tree bool
}

func npmLayoutOf(agent string) npmLayout {
	switch agent {
	case AgentClaude:
		// @anthropic-ai/claude-code lists @anthropic-ai/claude-code-<platform>
		// (Claude's own platform names) at the same version; its
		// package/claude is the native binary the store serves.
		return npmLayout{
			pkg:         NpmClaude,
			platformKey: func(t string) string { return NpmClaude + "-" + t },
			sub:         func(string) string { return "package" },
			only:        []string{claudeEntry},
			validate:    validateClaudeTree,
			target:      func(p string) string { return p },
		}
	case AgentCodex:
		// @openai/codex lists @openai/codex-linux-<arch> as an alias of its
		// own version <v>-linux-<arch>, whose package/vendor/<target> is
		// the standalone package tree the store serves.
		return npmLayout{
			pkg: NpmCodex,
			platformKey: func(t string) string {
				if strings.HasPrefix(t, "aarch64") {
					return NpmCodex + "-linux-arm64"
				}
				return NpmCodex + "-linux-x64"
			},
			sub:      func(t string) string { return "package/vendor/" + t },
			validate: validateCodexTree,
			target:   codexTarget,
		}
	case AgentOpencode:
		return opencodeLayout()
	case AgentDroid:
		return droidLayout()
	case AgentCopilot:
		return copilotLayout()
	case AgentPi:
		return piLayout()
	}
	// Gemini CLI is one bundled Node program for every platform.
	return npmLayout{
		pkg:      NpmGemini,
		sub:      func(string) string { return "package" },
		validate: validateGeminiTree,
		node:     true,
		target:   func(string) string { return "node" },
	}
}

// npmSource is an npm registry as a release source.
type npmSource struct {
	agent    string
	registry string // base URL, no trailing slash
	layout   npmLayout
	cfg      Config
}

func newNpmSource(cfg Config, agent string) *npmSource {
	var reg string
	switch agent {
	case AgentClaude:
		reg = cfg.Claude.Registry
	case AgentCodex:
		reg = cfg.Codex.Registry
	default:
		n, _ := cfg.npmSettings(agent)
		reg = n.Registry
	}
	if cfg.Bundle != "" {
		reg = bundleNpmBase
	}
	return &npmSource{agent: agent, registry: strings.TrimRight(reg, "/"), layout: npmLayoutOf(agent), cfg: cfg}
}

func (n *npmSource) target(platform string) string { return n.layout.target(platform) }

// packument is the part of a registry's package document cco reads.
type packument struct {
	Name     string                     `json:"name"`
	DistTags map[string]string          `json:"dist-tags"`
	Versions map[string]json.RawMessage `json:"versions"`
	Time     map[string]string          `json:"time"`
}

// npmManifest is one version of a packument.
type npmManifest struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	Engines              json.RawMessage   `json:"engines"`
	OptionalDependencies map[string]string `json:"optionalDependencies"`
	Dist                 struct {
		Integrity  string         `json:"integrity"`
		Tarball    string         `json:"tarball"`
		Signatures []npmSignature `json:"signatures"`
	} `json:"dist"`
	published time.Time
	raw       json.RawMessage
}

// escapeName is a package name in a registry URL, as npm writes it
// (@scope%2fname).
func escapeName(name string) string {
	return strings.Replace(url.PathEscape(name), "%40", "@", 1)
}

// abbreviated is npm's own Accept for a packument without what installing
// does not need (readmes, every version's full package.json, the publish
// times): a fraction of the size, for resolving a channel.
const abbreviated = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*"

// packument fetches and parses name's packument; full asks for the whole
// document (the publish times an expired key is judged by).
func (n *npmSource) packument(ctx context.Context, tr source, name string, full bool) (*packument, string, error) {
	u := n.registry + "/" + escapeName(name)
	if !full {
		ctx = withAccept(ctx, abbreviated)
	}
	b, err := tr.doc(ctx, u, maxPackument)
	if err != nil {
		var nf *NotFoundError
		if errors.As(err, &nf) {
			return nil, u, fmt.Errorf("the registry %s has no package %s (HTTP 404 at %s)", n.registry, name, u)
		}
		return nil, u, fmt.Errorf("fetching the packument of %s: %w", name, err)
	}
	var p packument
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, u, fmt.Errorf("%s: the packument does not parse: %v", u, err)
	}
	if p.Name != name {
		return nil, u, fmt.Errorf("%s is the packument of %q, not %s", u, p.Name, name)
	}
	return &p, u, nil
}

// manifest is version's entry of the packument, checked to be that version.
func (p *packument) manifest(u, version string) (*npmManifest, error) {
	raw, ok := p.Versions[version]
	if !ok {
		return nil, fmt.Errorf("%s has no version %s", u, version)
	}
	var m npmManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: version %s does not parse: %v", u, version, err)
	}
	if m.Name != p.Name || m.Version != version {
		return nil, fmt.Errorf("%s: the entry of version %s is %s@%s", u, version, m.Name, m.Version)
	}
	if t, err := time.Parse(time.RFC3339, p.Time[version]); err == nil {
		m.published = t
	}
	m.raw = raw
	return &m, nil
}

func (n *npmSource) resolve(ctx context.Context, run *provision.View, tr source, pin, channel, target string) (string, *resolved, error) {
	if n.layout.native {
		v, note, err := n.resolveNative(ctx, tr, pin, channel, target)
		if err != nil {
			return "", nil, err
		}
		return v, &resolved{note: note}, nil
	}
	p, u, err := n.packument(ctx, tr, n.layout.pkg, false)
	if err != nil {
		return "", nil, err
	}
	v := pin
	if v == "" {
		var ok bool
		if v, ok = p.DistTags[channel]; !ok {
			var tags []string
			for t := range p.DistTags {
				tags = append(tags, t)
			}
			return "", nil, fmt.Errorf("%s has no dist-tag %q (it has %s): set %s.channel to one of them, or pin %s.version", u, channel, strings.Join(slices.Sorted(slices.Values(tags)), ", "), n.agent, n.agent)
		}
	}
	if err := CheckVersion(u+" "+channel, v); err != nil {
		return "", nil, err
	}
	m, err := p.manifest(u, v)
	if err != nil {
		return "", nil, err
	}
	res := &resolved{}
	// A bundle is made where it is not run: its Node is the target's.
	if n.layout.node && run != nil {
		if res.node, err = checkNode(run, n.agent+".node", n.cfg.nodeOf(n.agent), m.Name+"@"+m.Version, enginesNode(m.Engines)); err != nil {
			return "", nil, err
		}
	}
	return v, res, nil
}

// build is the package and version that hold the build for target: the
// optional dependency the main package names for it (a version, or an
// npm: alias as Codex's are), or the main package itself.
func (n *npmSource) build(main *npmManifest, target string) (string, string, error) {
	if n.layout.platformKey == nil {
		return main.Name, main.Version, nil
	}
	key := n.layout.platformKey(target)
	spec, ok := main.OptionalDependencies[key]
	if !ok {
		return "", "", fmt.Errorf("%s@%s has no build for %s (no optional dependency %s)", main.Name, main.Version, target, key)
	}
	name, version := key, spec
	if alias, ok := strings.CutPrefix(spec, "npm:"); ok {
		i := strings.LastIndex(alias, "@")
		if i <= 0 {
			return "", "", fmt.Errorf("%s@%s: the optional dependency %s is %q, not npm:NAME@VERSION", main.Name, main.Version, key, spec)
		}
		name, version = alias[:i], alias[i+1:]
	}
	// The build is the release: one vendor, one version.
	if !strings.HasPrefix(name, main.Name) || !strings.HasPrefix(version, main.Version) {
		return "", "", fmt.Errorf("%s@%s names %s@%s for %s: not a build of this release", main.Name, main.Version, name, version, target)
	}
	// A build's version is never a path of ours; it names a packument entry.
	if !buildVersionRE.MatchString(version) {
		return "", "", fmt.Errorf("%s@%s: the optional dependency %s has the version %q, not a version", main.Name, main.Version, key, version)
	}
	return name, version, nil
}

var buildVersionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[A-Za-z0-9.-]+)?$`)

// npmRelease is a fetched and verified tarball.
type npmRelease struct {
	name, version string
	url           string
	verified      string
	noKey         string
	// docs are the packument entries the bundle carries, by package.
	docs map[string]*npmManifest
}

// fetchTarball resolves the build of version for target, verifies its
// registry signature and leaves its tarball in dir as "package.tgz" once
// its sha512 is the integrity's.
func (n *npmSource) fetchTarball(ctx context.Context, tr source, version, target string, dir *os.File) (*npmRelease, error) {
	rel, m, err := n.buildManifest(ctx, tr, version, target)
	if err != nil {
		return nil, err
	}
	if err := n.download(ctx, tr, rel, m, dir, "package.tgz"); err != nil {
		return nil, err
	}
	return rel, nil
}

// buildManifest is the packument entry of the build of version for
// target: the platform package's own version for a native agent, else the
// optional dependency the main package names, or the main package itself.
func (n *npmSource) buildManifest(ctx context.Context, tr source, version, target string) (*npmRelease, *npmManifest, error) {
	if n.layout.native {
		name := n.layout.platformKey(target)
		p, u, err := n.packument(ctx, tr, name, true)
		if err != nil {
			return nil, nil, err
		}
		m, err := p.manifest(u, version)
		if err != nil {
			return nil, nil, err
		}
		return &npmRelease{name: name, version: version, docs: map[string]*npmManifest{name: m}}, m, nil
	}
	p, u, err := n.packument(ctx, tr, n.layout.pkg, true)
	if err != nil {
		return nil, nil, err
	}
	main, err := p.manifest(u, version)
	if err != nil {
		return nil, nil, err
	}
	rel := &npmRelease{docs: map[string]*npmManifest{main.Name: main}}
	name, bv, err := n.build(main, target)
	if err != nil {
		return nil, nil, err
	}
	m := main
	if name != main.Name || bv != main.Version {
		bp, bu := p, u
		if name != p.Name {
			if bp, bu, err = n.packument(ctx, tr, name, true); err != nil {
				return nil, nil, err
			}
		}
		if m, err = bp.manifest(bu, bv); err != nil {
			return nil, nil, err
		}
		rel.docs[name+"@"+bv] = m
	}
	rel.name, rel.version = name, bv
	return rel, m, nil
}

// download verifies m's registry signature, when the registry serves one,
// and leaves its tarball in dir as file once its sha512 is the
// integrity's; rel records where it came from and what was checked.
func (n *npmSource) download(ctx context.Context, tr source, rel *npmRelease, m *npmManifest, dir *os.File, file string) error {
	keys, err := loadNpmKeys(n.cfg.NpmKeys)
	if err != nil {
		return err
	}
	if rel.verified, rel.noKey, err = n.verifySignature(keys, m); err != nil {
		return err
	}
	rel.url = n.tarballURL(m.Name, m.Dist.Tarball)
	return n.fetchIntegrity(ctx, tr, rel.url, m.Name+"@"+m.Version, m.Dist.Integrity, dir, file)
}

// verifySignature checks m's registry signatures with keys, when the
// registry serves any. It says what was verified, and why no signature
// was, for the report.
func (n *npmSource) verifySignature(keys []npmKey, m *npmManifest) (verified, noKey string, err error) {
	if len(m.Dist.Signatures) == 0 {
		return "sha512 (dist.integrity) only: the registry serves no signature",
			"the registry " + n.registryName() + " serves no signature for " + m.Name, nil
	}
	kid, err := verifyNpmSignatures(keys, m.Dist.Signatures, m.Name, m.Version, m.Dist.Integrity, m.published)
	if err != nil {
		return "", "", err
	}
	return "sha512 (dist.integrity) and the registry signature (key " + kid + ")", "", nil
}

// fetchIntegrity downloads url into dir as file, through the hash, and
// keeps it only when its sha512 is integrity's.
func (n *npmSource) fetchIntegrity(ctx context.Context, tr source, url, what, integrity string, dir *os.File, file string) error {
	want, err := sha512Of(integrity)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	partial := file + ".partial"
	f, err := createIn(dir, partial, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha512.New()
	limit := n.cfg.UnpackLimit
	if limit <= 0 {
		limit = extract.DefaultLimit
	}
	if _, err := tr.download(ctx, url, f, h, limit); err != nil {
		unix.Unlinkat(int(dir.Fd()), partial, 0)
		return err
	}
	if got := h.Sum(nil); string(got) != string(want) {
		unix.Unlinkat(int(dir.Fd()), partial, 0)
		return fmt.Errorf("%s: sha512 %s, but dist.integrity says %s (integrity mismatch): refusing it; nothing was installed (fix: have the registry, or the remote whose cache serves it, fetch that tarball again, then run cco-install again)", url, base64.StdEncoding.EncodeToString(got), integrity)
	}
	return renameIn(dir, partial, file)
}

func (n *npmSource) registryName() string {
	if n.cfg.Bundle != "" {
		return "of the bundle " + n.cfg.Bundle
	}
	return n.registry
}

// tarballURL is where the tarball is fetched: dist.tarball when it is on
// the registry, else the registry's own path for it (npm's
// replace-registry-host): a packument never sends cco to another host.
func (n *npmSource) tarballURL(name, tarball string) string {
	base := path.Base(tarball)
	std := n.registry + "/" + name + "/-/" + base
	t, err := url.Parse(tarball)
	r, rerr := url.Parse(n.registry)
	if err != nil || rerr != nil || t.Scheme != r.Scheme || t.Host != r.Host || r.Host == "" || t.RawQuery != "" {
		return std
	}
	return tarball
}

// sha512Of reads the sha512 of an integrity string (Subresource Integrity:
// space-separated algo-base64 hashes). npm's registry always gives one.
func sha512Of(integrity string) ([]byte, error) {
	for _, h := range strings.Fields(integrity) {
		if b64, ok := strings.CutPrefix(h, "sha512-"); ok {
			if i := strings.IndexByte(b64, '?'); i >= 0 {
				b64 = b64[:i]
			}
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil || len(b) != sha512.Size {
				return nil, fmt.Errorf("dist.integrity %q: the sha512 is not 64 base64 bytes", integrity)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("dist.integrity %q has no sha512: refusing a release that cannot be verified", integrity)
}

func (n *npmSource) fetch(run *provision.Run, p *vendorPlan, sgd *staging) (*fetched, error) {
	if n.layout.tree {
		return n.fetchTree(run, p, sgd)
	}
	rel, err := n.fetchTarball(run.Ctx, p.tr, p.version, p.target, sgd.dir)
	if err != nil {
		return nil, err
	}
	f := &fetched{url: rel.url, verified: rel.verified, noKey: rel.noKey}
	if p.res != nil {
		f.node = p.res.node
	}
	step := StepGemini
	if a, ok := lookupAgent(n.agent); ok {
		step = a.step
	}
	if prev := loadState(&run.View, step); rel.noKey != "" && (prev == nil || prev.NoKey != rel.noKey) {
		f.warnings = append(f.warnings, n.agent+": only the sha512 integrity is verified: "+rel.noKey+" (a registry or proxy that passes on "+PublicRegistry+"'s packuments keeps their signatures: check its settings)")
	}
	if f.members, f.stripped, err = n.unpack(sgd, rel, p.version, p.target); err != nil {
		return nil, err
	}
	return f, nil
}

// unpack extracts the verified tarball, moves the layout's directory of
// it to "version" and validates the tree. It returns the version
// directory's members.
func (n *npmSource) unpack(sgd *staging, rel *npmRelease, version, target string) ([]extract.Member, []string, error) {
	tf, err := openIn(sgd.dir, "package.tgz")
	if err != nil {
		return nil, nil, err
	}
	defer tf.Close()
	pdir, err := subdir(sgd.dir, "pkg")
	if err != nil {
		return nil, nil, err
	}
	defer pdir.Close()
	res, err := extract.Extract(tf, pdir, n.cfg.UnpackLimit)
	if err != nil {
		return nil, nil, fmt.Errorf("unpacking %s: %w", rel.url, err)
	}
	sub := n.layout.sub(target)
	kinds := map[string]string{}
	for _, m := range res.Members {
		kinds[m.Name] = m.Kind
	}
	// The way to the subtree is directories only: a link there would move
	// something else than the tree verified here.
	parts := strings.Split(sub, "/")
	for i := range parts {
		if d := strings.Join(parts[:i+1], "/"); kinds[d] != extract.KindDir {
			return nil, nil, fmt.Errorf("%s: %s is not a directory of the package (a %s build of %s@%s has it)", rel.url, d, target, rel.name, rel.version)
		}
	}
	var members []extract.Member
	for _, m := range res.Members {
		name, ok := strings.CutPrefix(m.Name, sub+"/")
		if !ok {
			continue
		}
		if n.layout.only != nil && !slices.Contains(n.layout.only, name) {
			continue
		}
		if m.Kind == extract.KindLink {
			// The extractor kept links inside the package; the subtree
			// must hold them too, since only it is installed.
			if t := path.Clean(path.Join(path.Dir(name), m.Target)); t == ".." || strings.HasPrefix(t, "../") || path.IsAbs(m.Target) {
				return nil, nil, fmt.Errorf("%s: the symlink %s points to %q, outside %s: refusing the package", rel.url, m.Name, m.Target, sub)
			}
		}
		m.Name = name
		members = append(members, m)
	}
	if n.layout.only == nil {
		if err := unix.Renameat(int(sgd.dir.Fd()), "pkg/"+sub, int(sgd.dir.Fd()), "version"); err != nil {
			return nil, nil, fmt.Errorf("moving %s into place in %s: %w", sub, sgd.dir.Name(), err)
		}
	} else {
		vd, err := subdir(sgd.dir, "version")
		if err != nil {
			return nil, nil, err
		}
		vd.Close()
		for _, o := range n.layout.only {
			if kinds[sub+"/"+o] != extract.KindFile {
				return nil, nil, fmt.Errorf("%s: the package has no file %s/%s", rel.url, sub, o)
			}
			if err := unix.Renameat(int(sgd.dir.Fd()), "pkg/"+sub+"/"+o, int(sgd.dir.Fd()), "version/"+o); err != nil {
				return nil, nil, fmt.Errorf("moving %s into place: %w", o, err)
			}
		}
	}
	vdir, err := openIn(sgd.dir, "version")
	if err != nil {
		return nil, nil, err
	}
	defer vdir.Close()
	if err := n.layout.validate(vdir, memberInfos(members), version, target); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", rel.url, err)
	}
	var stripped []string
	for _, s := range res.Stripped {
		if name, ok := strings.CutPrefix(s, sub+"/"); ok {
			stripped = append(stripped, name)
		}
	}
	return members, stripped, nil
}

// validateGeminiTree checks the package is Gemini CLI at the version:
// package.json's name and version, and its entry script.
func validateGeminiTree(dir *os.File, files map[string]memberInfo, version, _ string) error {
	var pj struct{ Name, Version string }
	var pe *fs.PathError
	if err := readJSONIn(dir, "package.json", &pj); errors.As(err, &pe) {
		return errors.New("the package has no package.json")
	} else if err != nil {
		return err
	}
	if pj.Name != NpmGemini || pj.Version != version {
		return fmt.Errorf("package.json is %s@%s, not %s@%s", pj.Name, pj.Version, NpmGemini, version)
	}
	if m, ok := files[GeminiEntry]; !ok || m.kind != extract.KindFile {
		return fmt.Errorf("the package has no %s", GeminiEntry)
	}
	return nil
}

// bundle resolves and fetches the agent's release as for an install and
// adds it to the bundle: each package's packument cut to the bundled
// version (its signature covers name, version and integrity alone, so it
// still verifies), and the tarball.
func (n *npmSource) bundle(ctx context.Context, tr source, platform string, dir *os.File, idx *bundleIndex, small map[string][]byte, large map[string]string, order *[]string) error {
	pin, channel := n.cfg.settings(n.agent)
	if pin != "" {
		channel = ""
	}
	target := n.target(platform)
	v, _, err := n.resolve(ctx, nil, tr, pin, channel, target)
	if err != nil {
		return err
	}
	sub, err := subdir(dir, n.agent)
	if err != nil {
		return err
	}
	defer sub.Close()
	if n.layout.tree {
		return n.bundleTree(ctx, tr, v, platform, sub, idx, small, large, order)
	}
	rel, err := n.fetchTarball(ctx, tr, v, target, sub)
	if err != nil {
		return fmt.Errorf("%s: %w", v, err)
	}
	files := bundleDocs(rel.docs, small)
	tgz := "npm/" + rel.name + "/-/" + path.Base(rel.url)
	large[tgz] = n.agent + "/package.tgz"
	files = append(files, tgz)
	*order = append(*order, tgz)
	idx.Agents[n.agent] = bundleEntry{Version: v, Platform: target, Files: files}
	return nil
}

// bundleDocs adds each package's packument, cut to the bundled versions,
// to small, and lists their members.
func bundleDocs(docs map[string]*npmManifest, small map[string][]byte) []string {
	byName := map[string]*packument{}
	var names []string
	for _, m := range docs {
		p := byName[m.Name]
		if p == nil {
			p = &packument{Name: m.Name, DistTags: map[string]string{}, Versions: map[string]json.RawMessage{}, Time: map[string]string{}}
			byName[m.Name] = p
			names = append(names, m.Name)
		}
		p.Versions[m.Version] = m.raw
		if !m.published.IsZero() {
			p.Time[m.Version] = m.published.Format(time.RFC3339Nano)
		}
	}
	var files []string
	for _, name := range slices.Sorted(slices.Values(names)) {
		b, err := json.Marshal(byName[name])
		if err != nil {
			panic(err) // a packument of parsed entries always marshals
		}
		member := "npm/" + escapeName(name)
		small[member] = b
		files = append(files, member)
	}
	return files
}
