package vendorfetch

import (
	"archive/tar"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

// npmReg is an npm registry on the test store: packuments at
// /npm/<name>, tarballs at /npm/<name>/-/<file>.tgz, signed with a key made
// here and listed in keysFile (the form of /-/npm/v1/keys), which tests
// pass as npm_keys.
type npmReg struct {
	t        testing.TB
	s        *store
	key      *ecdsa.PrivateKey
	keyID    string
	keysFile string
	docs     map[string]map[string]any
}

func newNpmReg(t testing.TB, s *store) *npmReg {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(der)
	r := &npmReg{t: t, s: s, key: k, keyID: "SHA256:" + base64.RawStdEncoding.EncodeToString(h[:]), docs: map[string]map[string]any{}}
	r.keysFile = filepath.Join(t.TempDir(), "npm-keys.json")
	doc := map[string]any{"keys": []map[string]any{{"expires": nil, "keyid": r.keyID, "keytype": "ecdsa-sha2-nistp256", "scheme": "ecdsa-sha2-nistp256", "key": base64.StdEncoding.EncodeToString(der)}}}
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(r.keysFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s.put("/npm/-/npm/v1/keys", b)
	return r
}

func (r *npmReg) base() string { return r.s.srv.URL + "/npm" }

// npmPub is one version to publish.
type npmPub struct {
	name, version string
	tarball       []byte
	engines       map[string]string
	optional      map[string]string
	tags          []string
	noSig         bool   // serve no dist.signatures
	signAs        string // sign this message instead of the right one
	otherKey      bool   // sign with a key nobody trusts
	integrityOf   []byte // dist.integrity of these bytes, not the tarball's
	published     time.Time
	tarballURL    string // dist.tarball ("" = on the registry)
}

func integrity(b []byte) string {
	h := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(h[:])
}

func (r *npmReg) publish(p npmPub) {
	r.t.Helper()
	base := path.Base(p.name) + "-" + p.version + ".tgz"
	tpath := "/npm/" + p.name + "/-/" + base
	r.s.put(tpath, p.tarball)
	integ := integrity(p.tarball)
	if p.integrityOf != nil {
		integ = integrity(p.integrityOf)
	}
	dist := map[string]any{"integrity": integ, "tarball": r.s.srv.URL + tpath}
	if p.tarballURL != "" {
		dist["tarball"] = p.tarballURL
	}
	if !p.noSig {
		msg := p.name + "@" + p.version + ":" + integ
		if p.signAs != "" {
			msg = p.signAs
		}
		key := r.key
		kid := r.keyID
		if p.otherKey {
			key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			kid = "SHA256:not-trusted"
		}
		h := sha256.Sum256([]byte(msg))
		sig, err := ecdsa.SignASN1(rand.Reader, key, h[:])
		if err != nil {
			r.t.Fatal(err)
		}
		dist["signatures"] = []map[string]string{{"keyid": kid, "sig": base64.StdEncoding.EncodeToString(sig)}}
	}
	m := map[string]any{"name": p.name, "version": p.version, "dist": dist}
	if p.engines != nil {
		m["engines"] = p.engines
	}
	if p.optional != nil {
		m["optionalDependencies"] = p.optional
	}
	doc := r.docs[p.name]
	if doc == nil {
		doc = map[string]any{"name": p.name, "dist-tags": map[string]string{}, "versions": map[string]any{}, "time": map[string]string{}}
		r.docs[p.name] = doc
	}
	doc["versions"].(map[string]any)[p.version] = m
	pub := p.published
	if pub.IsZero() {
		pub = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	}
	doc["time"].(map[string]string)[p.version] = pub.Format(time.RFC3339Nano)
	for _, t := range p.tags {
		doc["dist-tags"].(map[string]string)[t] = p.version
	}
	b, _ := json.Marshal(doc)
	r.s.put("/npm/"+p.name, b)
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
	r.publish(npmPub{name: NpmGemini, version: version, tarball: tb, engines: map[string]string{"node": ">=20"}, tags: tags})
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
	r.publish(npmPub{name: NpmClaude + "-" + platform, version: version, tarball: tb})
	r.publish(npmPub{name: NpmClaude, version: version, tarball: npmTarball(r.t, []tarEntry{{name: "package/package.json", body: "{}"}}),
		optional: map[string]string{NpmClaude + "-" + platform: version, NpmClaude + "-darwin-arm64": version}, engines: map[string]string{"node": ">=22.0.0"}, tags: tags})
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
	r.publish(npmPub{name: NpmCodex, version: version + "-linux-" + arch, tarball: npmTarball(r.t, codexNpmEntries(version, target, extra...))})
	r.publish(npmPub{name: NpmCodex, version: version, tarball: npmTarball(r.t, []tarEntry{{name: "package/package.json", body: "{}"}}),
		optional: map[string]string{NpmCodex + "-linux-" + arch: "npm:" + NpmCodex + "@" + version + "-linux-" + arch}, tags: []string{"latest"}})
}

// npmConfig points every npm source at the registry, trusting its key.
func (r *npmReg) config(agents ...string) Config {
	c := r.s.config(agents...)
	c.Gemini.Registry, c.Claude.Registry, c.Codex.Registry = r.base(), r.base(), r.base()
	c.NpmKeys = r.keysFile
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
