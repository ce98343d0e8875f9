// Package npmtest is an npm registry for tests, on loopback: packuments
// at /<name>, tarballs at /<name>/-/<file>.tgz and the keys endpoint
// /-/npm/v1/keys, with dist.integrity and dist.signatures made here by a
// key of the test's own (KeysFile is its npm_keys). Tarballs are bytes or
// files on disk (the real vendors' packs, which are large).
package npmtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Registry is a running test registry.
type Registry struct {
	t        testing.TB
	srv      *httptest.Server
	key      *ecdsa.PrivateKey
	KeyID    string
	KeysFile string // the registry's keys, in the form of /-/npm/v1/keys

	mu       sync.Mutex
	docs     map[string]map[string]any
	files    map[string][]byte // URL path -> bytes
	disk     map[string]string // URL path -> file
	requests []string
	accepts  map[string][]string // URL path -> the Accept header of each request
}

// New starts a registry, closed when the test ends.
func New(t testing.TB) *Registry {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(der)
	r := &Registry{t: t, key: k, KeyID: "SHA256:" + base64.RawStdEncoding.EncodeToString(h[:]),
		docs: map[string]map[string]any{}, files: map[string][]byte{}, disk: map[string]string{}, accepts: map[string][]string{}}
	keys, _ := json.Marshal(map[string]any{"keys": []map[string]any{{"expires": nil, "keyid": r.KeyID, "keytype": "ecdsa-sha2-nistp256", "scheme": "ecdsa-sha2-nistp256", "key": base64.StdEncoding.EncodeToString(der)}}})
	r.KeysFile = filepath.Join(t.TempDir(), "npm-keys.json")
	if err := os.WriteFile(r.KeysFile, keys, 0o644); err != nil {
		t.Fatal(err)
	}
	r.files["/-/npm/v1/keys"] = keys
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the registry's base URL.
func (r *Registry) URL() string { return r.srv.URL }

// Close stops the registry (an offline run reaches nothing).
func (r *Registry) Close() { r.srv.Close() }

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.URL.Path)
	r.accepts[req.URL.Path] = append(r.accepts[req.URL.Path], req.Header.Get("Accept"))
	b, ok := r.files[req.URL.Path]
	f, onDisk := r.disk[req.URL.Path]
	r.mu.Unlock()
	switch {
	case onDisk:
		http.ServeFile(w, req, f)
	case ok:
		http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(b))
	default:
		http.NotFound(w, req)
	}
}

// Count is how many requests had a path starting with prefix.
func (r *Registry) Count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.requests {
		if strings.HasPrefix(p, prefix) {
			n++
		}
	}
	return n
}

// Accepts are the Accept headers of the requests for path, in order.
func (r *Registry) Accepts(path string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.accepts[path]...)
}

// Reset forgets the requests seen.
func (r *Registry) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = nil
	r.accepts = map[string][]string{}
}

// Pub is one version to publish.
type Pub struct {
	Name, Version string
	Tarball       []byte // the tarball's bytes, or
	TarballFile   string // a file holding it
	Engines       map[string]string
	Optional      map[string]string
	Tags          []string
	NoSig         bool   // serve no dist.signatures
	SignAs        string // sign this message instead of the right one
	OtherKey      bool   // sign with a key nobody trusts
	IntegrityOf   []byte // give dist.integrity of these bytes, not the tarball's
	Integrity     string // give this dist.integrity
	Published     time.Time
	TarballURL    string // dist.tarball ("" = on the registry)
	// Fields are more of the version's manifest (dependencies, os, cpu,
	// bin...), as its package.json has them.
	Fields map[string]any
}

// Integrity is the sha512 Subresource Integrity of r's bytes.
func Integrity(rd io.Reader) (string, error) {
	h := sha512.New()
	if _, err := io.Copy(h, rd); err != nil {
		return "", err
	}
	return "sha512-" + base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// Publish adds a version to the name's packument.
func (r *Registry) Publish(p Pub) {
	r.t.Helper()
	tpath := "/" + p.Name + "/-/" + path.Base(p.Name) + "-" + p.Version + ".tgz"
	var integ string
	var err error
	r.mu.Lock()
	if p.TarballFile != "" {
		r.disk[tpath] = p.TarballFile
		var f *os.File
		if f, err = os.Open(p.TarballFile); err == nil {
			integ, err = Integrity(f)
			f.Close()
		}
	} else {
		r.files[tpath] = p.Tarball
		integ, err = Integrity(bytes.NewReader(p.Tarball))
	}
	r.mu.Unlock()
	if err != nil {
		r.t.Fatal(err)
	}
	if p.IntegrityOf != nil {
		integ, _ = Integrity(bytes.NewReader(p.IntegrityOf))
	}
	if p.Integrity != "" {
		integ = p.Integrity
	}
	dist := map[string]any{"integrity": integ, "tarball": r.srv.URL + tpath}
	if p.TarballURL != "" {
		dist["tarball"] = p.TarballURL
	}
	if !p.NoSig {
		msg := p.Name + "@" + p.Version + ":" + integ
		if p.SignAs != "" {
			msg = p.SignAs
		}
		key, kid := r.key, r.KeyID
		if p.OtherKey {
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
	m := map[string]any{}
	for k, v := range p.Fields {
		m[k] = v
	}
	m["name"], m["version"], m["dist"] = p.Name, p.Version, dist
	if p.Engines != nil {
		m["engines"] = p.Engines
	}
	if p.Optional != nil {
		m["optionalDependencies"] = p.Optional
	}
	pub := p.Published
	if pub.IsZero() {
		pub = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	doc := r.docs[p.Name]
	if doc == nil {
		doc = map[string]any{"name": p.Name, "dist-tags": map[string]string{}, "versions": map[string]any{}, "time": map[string]string{}}
		r.docs[p.Name] = doc
	}
	doc["versions"].(map[string]any)[p.Version] = m
	doc["time"].(map[string]string)[p.Version] = pub.Format(time.RFC3339Nano)
	for _, t := range p.Tags {
		doc["dist-tags"].(map[string]string)[t] = p.Version
	}
	b, _ := json.Marshal(doc)
	r.files["/"+p.Name] = b
}
