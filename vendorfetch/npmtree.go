package vendorfetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/vendorfetch/extract"
)

// A tree agent (Pi) is a Node program that needs its whole dependency
// tree. npm resolves the tree (npm install --package-lock-only, run as an
// unprivileged user, with no install script: it fetches packuments only),
// and cco does the rest itself, as for every other agent: each package of
// the lockfile is checked against its packument (the same integrity, and
// the registry's signature where it serves one), downloaded through the
// sha512 of that integrity, and unpacked by the safe extractor at the place
// the lockfile gives it under the version's node_modules. No package's
// install script runs, as root or anyone. The lockfile stays in the version
// directory as the record of what was installed; a bundle carries it, so
// that an offline install needs no npm.

// lockfile is the part of npm's package-lock.json (lockfileVersion 2 or
// 3) cco reads.
type lockfile struct {
	LockfileVersion int                  `json:"lockfileVersion"`
	Packages        map[string]lockEntry `json:"packages"`
}

type lockEntry struct {
	Name         string            `json:"name"` // an alias's real package
	Version      string            `json:"version"`
	Integrity    string            `json:"integrity"`
	Link         bool              `json:"link"`
	InBundle     bool              `json:"inBundle"`
	Dev          bool              `json:"dev"`
	Optional     bool              `json:"optional"`
	OS           []string          `json:"os"`
	CPU          []string          `json:"cpu"`
	Libc         []string          `json:"libc"`
	Dependencies map[string]string `json:"dependencies"`
}

// treeEntry is one package to install: where in the version directory,
// which package at which version, and the integrity the lockfile recorded.
type treeEntry struct {
	path, name, version, integrity string
}

// npmName is the shape of a package name that may name a directory.
var npmName = regexp.MustCompile(`^(@[A-Za-z0-9][A-Za-z0-9._~-]*/)?[A-Za-z0-9][A-Za-z0-9._~-]*$`)

// maxTree bounds a lockfile's packages: Pi's has about 200.
const maxTree = 5000

// lockTree reads a lockfile of the tree of pkg@version and lists the
// packages a platform needs, parents before their nested dependencies. A
// lockfile that does not describe exactly that tree is refused.
func lockTree(b []byte, pkg, version, platform string) ([]treeEntry, error) {
	var lf lockfile
	if err := json.Unmarshal(b, &lf); err != nil {
		return nil, fmt.Errorf("the lockfile does not parse: %v", err)
	}
	if lf.LockfileVersion != 2 && lf.LockfileVersion != 3 {
		return nil, fmt.Errorf("the lockfile has lockfileVersion %d, not 2 or 3 (npm 7 or later writes them)", lf.LockfileVersion)
	}
	if len(lf.Packages) > maxTree {
		return nil, fmt.Errorf("the lockfile lists %d packages, more than %d", len(lf.Packages), maxTree)
	}
	root, ok := lf.Packages[""]
	if !ok || len(root.Dependencies) != 1 || root.Dependencies[pkg] != version {
		return nil, fmt.Errorf("the lockfile's root does not depend on %s@%s alone", pkg, version)
	}
	if top := lf.Packages["node_modules/"+pkg]; top.Version != version || top.Name != "" && top.Name != pkg {
		return nil, fmt.Errorf("the lockfile has %s at %q, not %s", pkg, top.Version, version)
	}
	arch, _ := platformArch(platform)
	libc := "glibc"
	if strings.HasSuffix(platform, "-musl") {
		libc = "musl"
	}
	var out []treeEntry
	for p, e := range lf.Packages {
		if p == "" || e.InBundle {
			continue // the root, and what comes inside its parent's tarball
		}
		name, err := lockPath(p)
		if err != nil {
			return nil, err
		}
		if e.Link {
			return nil, fmt.Errorf("the lockfile's %s is a link to a directory, not a registry package: refusing it", p)
		}
		if e.Dev {
			continue
		}
		if !platformOK(e.OS, "linux") || !platformOK(e.CPU, arch) || !platformOK(e.Libc, libc) {
			if e.Optional {
				continue // another platform's build, as npm skips it
			}
			return nil, fmt.Errorf("the lockfile's %s@%s is for %v %v %v, not this %s system, and is not optional", p, e.Version, e.OS, e.CPU, e.Libc, platform)
		}
		if e.Name != "" {
			if !npmName.MatchString(e.Name) {
				return nil, fmt.Errorf("the lockfile's %s is an alias of %q, not a package name", p, e.Name)
			}
			name = e.Name
		}
		if err := CheckVersion("the lockfile's "+p, e.Version); err != nil {
			return nil, err
		}
		if _, err := sha512Of(e.Integrity); err != nil {
			return nil, fmt.Errorf("the lockfile's %s@%s: %w", p, e.Version, err)
		}
		out = append(out, treeEntry{path: p, name: name, version: e.Version, integrity: e.Integrity})
	}
	// Parents first: a nested node_modules lives in its parent's directory.
	sort.Slice(out, func(i, j int) bool {
		if a, b := strings.Count(out[i].path, "/"), strings.Count(out[j].path, "/"); a != b {
			return a < b
		}
		return out[i].path < out[j].path
	})
	return out, nil
}

// lockPath checks a lockfile key (node_modules/a/node_modules/@s/b) and
// returns the package name of its last element.
func lockPath(p string) (string, error) {
	rest, ok := strings.CutPrefix(p, "node_modules/")
	if !ok {
		return "", fmt.Errorf("the lockfile's %q is not under node_modules: refusing the tree", p)
	}
	var name string
	for _, part := range strings.Split(rest, "/node_modules/") {
		if !npmName.MatchString(part) || strings.Contains(part, "..") {
			return "", fmt.Errorf("the lockfile's %q holds %q, not a package name: refusing the tree", p, part)
		}
		name = part
	}
	return name, nil
}

// platformOK is npm's rule for an os, cpu or libc list: empty allows all;
// "!x" excludes x; a list of exclusions allows the rest.
func platformOK(list []string, have string) bool {
	if len(list) == 0 {
		return true
	}
	allowOnly := false
	for _, v := range list {
		if v == "!"+have {
			return false
		}
		if v == have {
			return true
		}
		if !strings.HasPrefix(v, "!") {
			allowOnly = true
		}
	}
	return !allowOnly
}

// lockMember is the bundle member that carries the lockfile of a tree.
func lockMember(agent, version string) string {
	return "npm/-/cco-lock/" + agent + "@" + version + ".json"
}

// treeRoot is the package.json cco writes at the top of a tree's version
// directory, the project npm resolved the lockfile for.
func treeRoot(agent, pkg, version string) []byte {
	b, _ := json.MarshalIndent(map[string]any{
		"name": "cco-" + agent, "private": true, "dependencies": map[string]string{pkg: version},
	}, "", "  ")
	return append(b, '\n')
}

// treeLock is the lockfile of the tree of the package at version: the
// bundle's, or the one npm resolves from the registry.
func (n *npmSource) treeLock(ctx context.Context, tr source, version string) ([]byte, error) {
	if b, ok := tr.(*bundleSource); ok {
		return b.doc(ctx, bundleScheme+lockMember(n.agent, version), maxPackument)
	}
	return npmResolve(ctx, n.cfg, n.registry, treeRoot(n.agent, n.layout.pkg, version))
}

// treePackage is one tree entry's packument entry, checked against the
// lockfile.
type treePackage struct {
	treeEntry
	m   *npmManifest
	url string
}

// treeManifests fetches every entry's packument (a few at a time), checks
// that its integrity is the lockfile's and verifies its registry signature
// where the registry serves one. It says what was verified.
func (n *npmSource) treeManifests(ctx context.Context, tr source, entries []treeEntry) ([]treePackage, string, string, error) {
	keys, err := loadNpmKeys(n.cfg.NpmKeys)
	if err != nil {
		return nil, "", "", err
	}
	out := make([]treePackage, len(entries))
	var mu sync.Mutex
	signed, unsigned := 0, []string{}
	err = parallel(ctx, len(entries), treeWorkers, func(ctx context.Context, i int) error {
		e := entries[i]
		m, err := n.treeManifest(ctx, tr, keys, e)
		if err != nil {
			return err
		}
		_, noKey, err := n.verifySignature(keys, m)
		if err != nil {
			return err
		}
		mu.Lock()
		if noKey == "" {
			signed++
		} else {
			unsigned = append(unsigned, e.name)
		}
		mu.Unlock()
		out[i] = treePackage{treeEntry: e, m: m, url: n.tarballURL(m.Name, m.Dist.Tarball)}
		return nil
	})
	if err != nil {
		return nil, "", "", err
	}
	verified := fmt.Sprintf("the tree of %d packages: each one's sha512 (the lockfile's integrity, the packument's dist.integrity)", len(entries))
	noKey := ""
	switch {
	case len(unsigned) == 0:
		verified += " and its registry signature"
	case signed == 0:
		verified += " only: the registry serves no signature"
		noKey = "the registry " + n.registryName() + " serves no signature for the packages of " + n.layout.pkg + "'s tree"
	default:
		slices.Sort(unsigned)
		verified += fmt.Sprintf(", and the registry signature of %d of them", signed)
		noKey = "the registry " + n.registryName() + " serves no signature for " + strings.Join(unsigned, ", ")
	}
	return out, verified, noKey, nil
}

// treeManifest is e's packument entry, with the same integrity as the
// lockfile's. The abbreviated packument has no publish times; a package
// signed by an expired key alone is read again in full, for its time.
func (n *npmSource) treeManifest(ctx context.Context, tr source, keys []npmKey, e treeEntry) (*npmManifest, error) {
	for _, full := range []bool{false, true} {
		p, u, err := n.packument(ctx, tr, e.name, full)
		if err != nil {
			return nil, fmt.Errorf("%s (in the lockfile as %s): %w", e.name, e.path, err)
		}
		m, err := p.manifest(u, e.version)
		if err != nil {
			return nil, err
		}
		want, _ := sha512Of(e.integrity)
		got, err := sha512Of(m.Dist.Integrity)
		if err != nil {
			return nil, fmt.Errorf("%s@%s: %w", e.name, e.version, err)
		}
		if string(got) != string(want) {
			return nil, fmt.Errorf("%s@%s: the registry's dist.integrity %s is not the lockfile's %s: refusing the tree; nothing was installed", e.name, e.version, m.Dist.Integrity, e.integrity)
		}
		if full || !m.published.IsZero() || !signedByExpired(keys, m.Dist.Signatures) {
			return m, nil
		}
	}
	panic("unreachable")
}

// signedByExpired reports whether a signature is by a known key that has
// an expiry: it vouches only with the publish time.
func signedByExpired(keys []npmKey, sigs []npmSignature) bool {
	for _, s := range sigs {
		for _, k := range keys {
			if k.keyID == s.KeyID && !k.expires.IsZero() {
				return true
			}
		}
	}
	return false
}

// treeWorkers is how many packages are fetched at once.
const treeWorkers = 8

// parallel runs f(0..n-1) on up to k goroutines; the first error cancels
// the rest and is returned.
func parallel(ctx context.Context, n, k int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(k, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			i = n
		}
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// fetchTree installs the tree of the planned version in the staging
// directory's "version": node_modules as the lockfile lays it out, the
// lockfile and the root package.json.
func (n *npmSource) fetchTree(run *provision.Run, p *vendorPlan, sgd *staging) (*fetched, error) {
	ctx := run.Ctx
	lock, err := n.treeLock(ctx, p.tr, p.version)
	if err != nil {
		return nil, err
	}
	entries, err := lockTree(lock, n.layout.pkg, p.version, p.platform)
	if err != nil {
		return nil, fmt.Errorf("%s@%s: %w", n.layout.pkg, p.version, err)
	}
	pkgs, verified, noKey, err := n.treeManifests(ctx, p.tr, entries)
	if err != nil {
		return nil, err
	}
	tdir, err := subdir(sgd.dir, "tarballs")
	if err != nil {
		return nil, err
	}
	defer tdir.Close()
	if err := n.treeDownload(ctx, p.tr, pkgs, tdir); err != nil {
		return nil, err
	}
	vdir, err := subdir(sgd.dir, "version")
	if err != nil {
		return nil, err
	}
	defer vdir.Close()
	f := &fetched{url: n.registryName(), verified: verified, noKey: noKey}
	if p.res != nil {
		f.node = p.res.node
	}
	made := map[string]bool{}
	for i, pk := range pkgs {
		ms, stripped, err := n.unpackEntry(sgd.dir, tdir, vdir, strconv.Itoa(i), pk, made)
		if err != nil {
			return nil, err
		}
		f.members = append(f.members, ms...)
		f.stripped = append(f.stripped, stripped...)
	}
	for d := range made {
		f.members = append(f.members, extract.Member{Name: d, Kind: extract.KindDir})
	}
	for _, file := range []struct {
		name string
		b    []byte
	}{{"package-lock.json", lock}, {"package.json", treeRoot(n.agent, n.layout.pkg, p.version)}} {
		m, err := writeIn(vdir, file.name, file.b)
		if err != nil {
			return nil, err
		}
		f.members = append(f.members, m)
	}
	if err := n.layout.validate(vdir, memberInfos(f.members), p.version, p.target); err != nil {
		return nil, fmt.Errorf("%s@%s: %w", n.layout.pkg, p.version, err)
	}
	step := StepPi
	if a, ok := lookupAgent(n.agent); ok {
		step = a.step
	}
	if prev := loadState(&run.View, step); noKey != "" && (prev == nil || prev.NoKey != noKey) {
		f.warnings = append(f.warnings, n.agent+": only the sha512 integrity is verified: "+noKey+" (a registry or proxy that passes on "+PublicRegistry+"'s packuments keeps their signatures: check its settings)")
	}
	return f, nil
}

// treeDownload fetches every package's tarball into dir as <index>.tgz,
// each kept only when its sha512 is the integrity's. A bundle is read in
// one pass.
func (n *npmSource) treeDownload(ctx context.Context, tr source, pkgs []treePackage, dir *os.File) error {
	if b, ok := tr.(*bundleSource); ok {
		want := map[string]bundleWant{}
		first := map[string]string{}
		var same [][2]string // {file, the file of the same member}
		for i, pk := range pkgs {
			member, file := strings.TrimPrefix(pk.url, bundleScheme), strconv.Itoa(i)+".tgz"
			if f, dup := first[member]; dup {
				same = append(same, [2]string{file, f})
				continue
			}
			first[member] = file
			want[member] = bundleWant{file: file, integrity: pk.m.Dist.Integrity}
		}
		if err := b.extractMembers(dir, want); err != nil {
			return err
		}
		for _, s := range same {
			if err := unix.Linkat(int(dir.Fd()), s[1], int(dir.Fd()), s[0], 0); err != nil {
				return fmt.Errorf("linking %s to %s in %s: %w", s[0], s[1], dir.Name(), err)
			}
		}
		return nil
	}
	// One line for the tree, not one per package.
	if ns, ok := tr.(*netSource); ok {
		ns.progress.logf("downloading the %d packages of %s's tree from %s", len(pkgs), n.layout.pkg, n.registry)
		// The same client, retries and the run's one retry budget; its
		// requests count in the run's.
		q := &netSource{client: ns.client, retries: ns.retries, backoff: ns.backoff, timeout: ns.timeout, budget: ns.budget, progress: newProgress(nil, "never")}
		defer func() { ns.requests.Add(q.requests.Load()) }()
		tr = q
	}
	return parallel(ctx, len(pkgs), treeWorkers, func(ctx context.Context, i int) error {
		pk := pkgs[i]
		return n.fetchIntegrity(ctx, tr, pk.url, pk.name+"@"+pk.version, pk.m.Dist.Integrity, dir, strconv.Itoa(i)+".tgz")
	})
}

// unpackEntry extracts the tarball <id>.tgz of tdir and moves its one top
// directory (npm's "package", whatever its name) to the entry's place in
// vdir, making the directories on the way (noted in made). It returns the
// members, named from vdir.
func (n *npmSource) unpackEntry(sg, tdir, vdir *os.File, id string, pk treePackage, made map[string]bool) ([]extract.Member, []string, error) {
	tf, err := openIn(tdir, id+".tgz")
	if err != nil {
		return nil, nil, err
	}
	defer tf.Close()
	xdir, err := subdir(sg, "x"+id)
	if err != nil {
		return nil, nil, err
	}
	defer xdir.Close()
	res, err := extract.ExtractWith(tf, xdir, n.cfg.UnpackLimit, extract.Options{LastFileWins: true})
	if err != nil {
		return nil, nil, fmt.Errorf("unpacking %s@%s (%s): %w", pk.name, pk.version, pk.url, err)
	}
	top := ""
	for _, m := range res.Members {
		t, _, _ := strings.Cut(m.Name, "/")
		if top != "" && t != top {
			return nil, nil, fmt.Errorf("%s@%s (%s) has more than one top directory (%s, %s): not an npm package", pk.name, pk.version, pk.url, top, t)
		}
		top = t
	}
	if top == "" {
		return nil, nil, fmt.Errorf("%s@%s (%s) is empty", pk.name, pk.version, pk.url)
	}
	parent, base := path.Split(pk.path)
	pd, err := mkdirAllIn(vdir, strings.TrimSuffix(parent, "/"), made)
	if err != nil {
		return nil, nil, err
	}
	defer pd.Close()
	if err := unix.Renameat(int(xdir.Fd()), top, int(pd.Fd()), base); err != nil {
		return nil, nil, fmt.Errorf("placing %s@%s at %s: %w", pk.name, pk.version, pk.path, err)
	}
	var out []extract.Member
	var stripped []string
	for _, m := range res.Members {
		rest, ok := strings.CutPrefix(m.Name, top)
		if !ok {
			continue
		}
		if m.Kind == extract.KindLink {
			// Links stay inside the package; the extractor already kept
			// them inside the archive.
			if t := path.Clean(path.Join(path.Dir(m.Name), m.Target)); t != top && !strings.HasPrefix(t, top+"/") {
				return nil, nil, fmt.Errorf("%s@%s: the symlink %s points to %q, outside the package: refusing it", pk.name, pk.version, m.Name, m.Target)
			}
		}
		m.Name = pk.path + rest
		out = append(out, m)
	}
	for _, s := range res.Stripped {
		if rest, ok := strings.CutPrefix(s, top); ok {
			stripped = append(stripped, pk.path+rest)
		}
	}
	return out, stripped, nil
}

// mkdirAllIn opens the directory rel of dir, making each missing element
// (noted in made, as a path from dir); it never follows a link, so that a
// package cannot send a later one out of the tree.
func mkdirAllIn(dir *os.File, rel string, made map[string]bool) (*os.File, error) {
	fd, err := unix.Dup(int(dir.Fd()))
	if err != nil {
		return nil, err
	}
	done := ""
	for _, part := range strings.Split(rel, "/") {
		if part == "" {
			continue
		}
		if part == "." || part == ".." {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: not a path in the tree", rel)
		}
		done = path.Join(done, part)
		err := unix.Mkdirat(fd, part, 0o755)
		if err == nil {
			made[done] = true
		} else if !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return nil, &fs.PathError{Op: "mkdir", Path: path.Join(dir.Name(), done), Err: err}
		}
		nfd, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("%s: %s is not a directory of the tree (a package holds a link or a file there): %w", path.Join(dir.Name(), done), done, err)
		}
		fd = nfd
	}
	return os.NewFile(uintptr(fd), path.Join(dir.Name(), rel)), nil
}

// writeIn writes b as the new file name of dir, mode 0644, and returns it
// as a member.
func writeIn(dir *os.File, name string, b []byte) (extract.Member, error) {
	f, err := createIn(dir, name, 0o644)
	if err != nil {
		return extract.Member{}, err
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return extract.Member{}, err
	}
	return extract.Member{Name: name, Kind: extract.KindFile, Mode: 0o644, Size: int64(len(b)), SHA256: sha256Hex(b)}, nil
}

// validateTree checks that the tree holds pkg at the version: its
// package.json's name and version under node_modules.
func validateTree(pkg string) func(*os.File, map[string]memberInfo, string, string) error {
	return func(dir *os.File, files map[string]memberInfo, version, _ string) error {
		pj := "node_modules/" + pkg + "/package.json"
		if m, ok := files[pj]; !ok || m.kind != extract.KindFile {
			return fmt.Errorf("the tree has no %s", pj)
		}
		var doc struct{ Name, Version string }
		if err := readJSONIn(dir, pj, &doc); err != nil {
			return err
		}
		if doc.Name != pkg || doc.Version != version {
			return fmt.Errorf("%s is %s@%s, not %s@%s", pj, doc.Name, doc.Version, pkg, version)
		}
		return nil
	}
}

// bundleTree adds the tree of version to a bundle: its lockfile, each
// package's packument cut to its version, and each tarball, all verified
// as for an install.
func (n *npmSource) bundleTree(ctx context.Context, tr source, version, platform string, dir *os.File, idx *bundleIndex, small map[string][]byte, large map[string]string, order *[]string) error {
	lock, err := n.treeLock(ctx, tr, version)
	if err != nil {
		return err
	}
	entries, err := lockTree(lock, n.layout.pkg, version, platform)
	if err != nil {
		return fmt.Errorf("%s@%s: %w", n.layout.pkg, version, err)
	}
	pkgs, _, _, err := n.treeManifests(ctx, tr, entries)
	if err != nil {
		return err
	}
	if err := n.treeDownload(ctx, tr, pkgs, dir); err != nil {
		return err
	}
	lm := lockMember(n.agent, version)
	small[lm] = lock
	files := []string{lm}
	docs := map[string]*npmManifest{}
	for _, pk := range pkgs {
		docs[pk.name+"@"+pk.version] = pk.m
	}
	files = append(files, bundleDocs(docs, small)...)
	for i, pk := range pkgs {
		member := "npm/" + pk.name + "/-/" + path.Base(pk.url)
		if _, dup := large[member]; dup {
			continue // one tarball at two places of the tree
		}
		large[member] = n.agent + "/" + strconv.Itoa(i) + ".tgz"
		files = append(files, member)
		*order = append(*order, member)
	}
	idx.Agents[n.agent] = bundleEntry{Version: version, Platform: n.target(platform), Files: files}
	return nil
}
