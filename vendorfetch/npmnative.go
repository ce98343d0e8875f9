package vendorfetch

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"

	"github.com/cco-dev/cco/vendorfetch/extract"
)

// A native agent's version is its platform package's own: the build cco
// installs and the version the binary prints. Its main package (the
// vendor's launcher, which cco does not install) names the release: a
// channel is the main package's dist-tag, and the build is the version of
// the platform package that the release lists. A mirror may lack that exact
// build (@factory/cli 0.225.1 lists @factory/cli-linux-x64 0.225.1, which
// a mirror had only as 0.225.2): the nearest later build of the same
// major.minor is taken, with a warning. A pin names a build the platform
// package has, or a release of the main package.

// resolveNative names the build to install for target: the pin, or the
// channel's release's build. note, when set, says a build was substituted.
func (n *npmSource) resolveNative(ctx context.Context, tr source, pin, channel, target string) (v, note string, err error) {
	plat := n.layout.platformKey(target)
	pp, pu, err := n.packument(ctx, tr, plat, false)
	if err != nil {
		return "", "", fmt.Errorf("%w (%s has no build for %s there)", err, n.agent, target)
	}
	if pin != "" {
		if _, ok := pp.Versions[pin]; ok {
			return pin, "", nil
		}
	}
	mp, mu, err := n.packument(ctx, tr, n.layout.pkg, false)
	if err != nil {
		return "", "", err
	}
	rel := pin
	if rel == "" {
		var ok bool
		if rel, ok = mp.DistTags[channel]; !ok {
			return "", "", fmt.Errorf("%s has no dist-tag %q (it has %s): set %s.channel to one of them, or pin %s.version", mu, channel, strings.Join(slices.Sorted(maps.Keys(mp.DistTags)), ", "), n.agent, n.agent)
		}
	} else if _, ok := mp.Versions[pin]; !ok {
		return "", "", fmt.Errorf("%s.version %s is neither a build of %s (%s has %s) nor a release of %s: pin one of those", n.agent, pin, plat, pu, newest(pp, 5), n.layout.pkg)
	}
	if err := CheckVersion(mu+" "+channel, rel); err != nil {
		return "", "", err
	}
	m, err := mp.manifest(mu, rel)
	if err != nil {
		return "", "", err
	}
	want, ok := m.OptionalDependencies[plat]
	if !ok {
		return "", "", fmt.Errorf("%s@%s has no build for %s (no optional dependency %s)", m.Name, rel, target, plat)
	}
	if !buildVersionRE.MatchString(want) {
		return "", "", fmt.Errorf("%s@%s: the optional dependency %s is %q, not a version", m.Name, rel, plat, want)
	}
	if _, ok := pp.Versions[want]; ok {
		return want, "", nil
	}
	got, err := nearestBuild(pp, want)
	if err != nil {
		return "", "", fmt.Errorf("%s@%s names %s@%s, which the registry %s does not have, nor a later build of it (it has %s): pin %s.version to one it has, or have the registry fetch %s@%s", m.Name, rel, plat, want, n.registryName(), newest(pp, 5), n.agent, plat, want)
	}
	return got, fmt.Sprintf("%s: the registry %s has no %s@%s, which %s@%s names: installing %s, the nearest later build of %s", n.agent, n.registryName(), plat, want, m.Name, rel, got, majorMinor(want)), nil
}

// nearestBuild is the lowest version of p after want with want's major and
// minor, and no prerelease: a later build of the same release.
func nearestBuild(p *packument, want string) (string, error) {
	w, err := semver.StrictNewVersion(want)
	if err != nil {
		return "", err
	}
	var best *semver.Version
	for s := range p.Versions {
		v, err := semver.StrictNewVersion(s)
		if err != nil || v.Prerelease() != "" || v.Major() != w.Major() || v.Minor() != w.Minor() || !v.GreaterThan(w) {
			continue
		}
		if best == nil || v.LessThan(best) {
			best = v
		}
	}
	if best == nil {
		return "", fmt.Errorf("no later build of %s", want)
	}
	return best.Original(), nil
}

func majorMinor(v string) string {
	if i := strings.LastIndexByte(v, '.'); i > 0 {
		return v[:i]
	}
	return v
}

// newest lists up to k of p's newest versions, for a message.
func newest(p *packument, k int) string {
	var vs []*semver.Version
	for s := range p.Versions {
		if v, err := semver.NewVersion(s); err == nil {
			vs = append(vs, v)
		}
	}
	slices.SortFunc(vs, func(a, b *semver.Version) int { return b.Compare(a) })
	var out []string
	for i := 0; i < len(vs) && i < k; i++ {
		out = append(out, vs[i].Original())
	}
	if len(out) == 0 {
		return "no versions"
	}
	return strings.Join(out, ", ")
}

// nativeBinary checks that the version directory holds the agent's binary:
// a regular, executable ELF file named name.
func nativeBinary(name string) func(*os.File, map[string]memberInfo, string, string) error {
	return func(dir *os.File, files map[string]memberInfo, _, _ string) error {
		m, ok := files[name]
		if !ok || m.kind != extract.KindFile {
			return fmt.Errorf("the package has no file %s", name)
		}
		if m.mode&0o111 == 0 {
			return fmt.Errorf("%s is not executable (mode %04o)", name, m.mode)
		}
		f, err := openIn(dir, name)
		if err != nil {
			return err
		}
		defer f.Close()
		magic := make([]byte, 4)
		if _, err := f.ReadAt(magic, 0); err != nil || !bytes.Equal(magic, []byte("\x7fELF")) {
			return fmt.Errorf("%s is not an ELF binary", name)
		}
		return nil
	}
}

// hasAVX2 reports whether this machine's processor has AVX2, which the x64
// builds of OpenCode and Droid need (without it, their baseline builds).
// A test seam.
var hasAVX2 = sync.OnceValue(func() bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return true // unknown: the usual build
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			return slices.Contains(strings.Fields(v), "avx2")
		}
	}
	return true
})
