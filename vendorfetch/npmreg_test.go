package vendorfetch

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/cco-dev/cco/vendorfetch/npmtest"
)

// npmReg is the test registry of npmtest beside the store, with the
// vendors' package shapes.
type npmReg struct {
	*npmtest.Registry
	t testing.TB
	s *store
}

func newNpmReg(t testing.TB, s *store) *npmReg {
	return &npmReg{Registry: npmtest.New(t), t: t, s: s}
}

// npmTarball is a gzipped tar of entries (named with their package/ prefix).
func npmTarball(t testing.TB, es []tarEntry) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, ModTime: time.Unix(499162500, 0)}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	var g bytes.Buffer
	gw := gzip.NewWriter(&g)
	gw.Write(b.Bytes())
	gw.Close()
	return g.Bytes()
}

// geminiEntries is a Gemini-CLI-shaped package: package.json and a bundle
// whose entry script prints its version (real Node can run it).
func geminiEntries(version string) []tarEntry {
	pj, _ := json.Marshal(map[string]any{"name": NpmGemini, "version": version, "type": "module", "bin": map[string]string{"gemini": GeminiEntry}, "engines": map[string]string{"node": ">=20"}})
	return []tarEntry{
		{name: "package/package.json", body: string(pj)},
		{name: "package/bundle/gemini.js", body: "#!/usr/bin/env node\nconsole.log(" + strconvQuote(version) + ");\n", mode: 0o755},
		{name: "package/bundle/chunk-1.js", body: "export const x = 1;\n" + strings.Repeat("// pad\n", 2000)},
		{name: "package/LICENSE", body: "Apache-2.0\n"},
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// publishGemini publishes a Gemini CLI version with the tags.
func (r *npmReg) publishGemini(version string, tags ...string) []byte {
	tb := npmTarball(r.t, geminiEntries(version))
	r.Publish(npmtest.Pub{Name: NpmGemini, Version: version, Tarball: tb, Engines: map[string]string{"node": ">=20"}, Tags: tags})
	return tb
}

// publishClaude publishes @anthropic-ai/claude-code at version and its
// build for platform.
func (r *npmReg) publishClaude(version, platform string, tags ...string) []byte {
	bin := claudeBinary(version, platform, 100<<10)
	pj, _ := json.Marshal(map[string]any{"name": NpmClaude + "-" + platform, "version": version})
	tb := npmTarball(r.t, []tarEntry{
		{name: "package/claude", body: string(bin), mode: 0o755},
		{name: "package/package.json", body: string(pj)},
		{name: "package/README.md", body: "readme"},
	})
	r.Publish(npmtest.Pub{Name: NpmClaude + "-" + platform, Version: version, Tarball: tb})
	r.Publish(npmtest.Pub{Name: NpmClaude, Version: version, Tarball: npmTarball(r.t, []tarEntry{{name: "package/package.json", body: "{}"}}),
		Optional: map[string]string{NpmClaude + "-" + platform: version, NpmClaude + "-darwin-arm64": version}, Engines: map[string]string{"node": ">=22.0.0"}, Tags: tags})
	return bin
}

// codexNpmEntries is the npm build of Codex: the standalone tree under
// package/vendor/<target>.
func codexNpmEntries(version, target string, extra ...tarEntry) []tarEntry {
	pj, _ := json.Marshal(map[string]any{"layoutVersion": 1, "version": version, "target": target, "variant": "codex", "entrypoint": "bin/codex", "resourcesDir": "codex-resources", "pathDir": "codex-path"})
	pre := "package/vendor/" + target + "/"
	es := []tarEntry{
		{name: pre + "codex-package.json", body: string(pj)},
		{name: pre + "bin/codex", body: "codex " + version, mode: 0o755},
		{name: pre + "codex-path/rg", body: "rg", mode: 0o755},
		{name: pre + "codex-resources/voice/lib/libz.so.1", body: "lib", mode: 0o755},
		{name: pre + "codex-resources/voice/lib/libz.so", typ: tar.TypeSymlink, link: "libz.so.1"},
		{name: "package/package.json", body: `{"name": "@openai/codex"}`},
	}
	return append(es, extra...)
}

// publishCodex publishes @openai/codex at version with its build for
// target as the alias version <version>-linux-<arch>.
func (r *npmReg) publishCodex(version, target string, extra ...tarEntry) {
	arch := "x64"
	if strings.HasPrefix(target, "aarch64") {
		arch = "arm64"
	}
	r.Publish(npmtest.Pub{Name: NpmCodex, Version: version + "-linux-" + arch, Tarball: npmTarball(r.t, codexNpmEntries(version, target, extra...))})
	r.Publish(npmtest.Pub{Name: NpmCodex, Version: version, Tarball: npmTarball(r.t, []tarEntry{{name: "package/package.json", body: "{}"}}),
		Optional: map[string]string{NpmCodex + "-linux-" + arch: "npm:" + NpmCodex + "@" + version + "-linux-" + arch}, Tags: []string{"latest"}})
}

// npmConfig points every npm source at the registry, trusting its key.
func (r *npmReg) config(agents ...string) Config {
	c := r.s.config(agents...)
	c.Gemini.Registry, c.Claude.Registry, c.Codex.Registry = r.URL(), r.URL(), r.URL()
	for _, a := range npmOnly {
		n := c.Npm[a]
		n.Registry = r.URL()
		c.Npm[a] = n
	}
	c.NpmKeys = r.KeysFile
	return c
}

// writeNode puts a Node on the test root's system PATH that prints
// version (a script: the version check is what is under test).
func writeNode(t testing.TB, root, version string) {
	t.Helper()
	p := filepath.Join(root, "usr/bin/node")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+version+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}
