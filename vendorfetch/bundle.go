package vendorfetch

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ulikunitz/xz"
	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/vendorfetch/extract"
)

// An offline bundle is a tar.xz whose first member is index.json, followed
// by the release files under the stores' own layouts (claude/<ver>/...,
// codex/releases/<ver>/..., and an npm registry's npm/<name> packument,
// cut to the bundled versions, and npm/<name>/-/<tarball>): installing from it runs the very same
// verification as online, against the manifests and checksum files the
// bundle carries.
const (
	bundleScheme     = "bundle:/"
	bundleClaudeBase = bundleScheme + AgentClaude
	bundleCodexBase  = bundleScheme + AgentCodex
	bundleNpmBase    = bundleScheme + "npm"
	bundleIndexName  = "index.json"
	// BundleSchema is the version of the bundle's index.
	BundleSchema = 1
)

type bundleIndex struct {
	Schema int                    `json:"schema"`
	Agents map[string]bundleEntry `json:"agents"`
}

type bundleEntry struct {
	Version  string   `json:"version"`
	Platform string   `json:"platform"` // Claude's platform, or Codex's target
	Files    []string `json:"files"`
}

// sourceName names where bytes came from, for the report and the receipt.
func sourceName(cfg Config, url string) string {
	if m, ok := strings.CutPrefix(url, bundleScheme); ok {
		return "the bundle " + cfg.Bundle + " (" + m + ")"
	}
	return url
}

// bundleSource serves a bundle's members as a source.
type bundleSource struct {
	path  string
	index bundleIndex
}

// openBundle reads the bundle's index and checks the whole stream once
// (xz's own checksum sits at the end of the stream, so a flipped byte
// anywhere is found before anything is installed).
func openBundle(path string) (*bundleSource, error) {
	b := &bundleSource{path: path}
	f, xr, err := b.openXZ()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(xr)
	h, err := tr.Next()
	if err != nil || h.Name != bundleIndexName {
		return nil, fmt.Errorf("the bundle %s does not start with %s: not a cco bundle", path, bundleIndexName)
	}
	raw, err := io.ReadAll(io.LimitReader(tr, maxSmall))
	if err != nil {
		return nil, fmt.Errorf("reading the bundle %s: %w", path, err)
	}
	if err := json.Unmarshal(raw, &b.index); err != nil {
		return nil, fmt.Errorf("the bundle %s: %s does not parse: %v", path, bundleIndexName, err)
	}
	if b.index.Schema != BundleSchema {
		return nil, fmt.Errorf("the bundle %s has schema %d; this cco reads %d", path, b.index.Schema, BundleSchema)
	}
	for a, e := range b.index.Agents {
		if err := CheckVersion("the bundle's "+a+" version", e.Version); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the bundle %s is damaged: %w", path, err)
		}
		if h.Typeflag != tar.TypeReg || seen[h.Name] {
			return nil, fmt.Errorf("the bundle %s: member %q is not a unique regular file", path, h.Name)
		}
		seen[h.Name] = true
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return nil, fmt.Errorf("the bundle %s is damaged at %q: %w", path, h.Name, err)
		}
	}
	// Read to the end of the xz stream: its index, footer and checksum
	// come after the tar's end marker.
	if _, err := io.Copy(io.Discard, xr); err != nil {
		return nil, fmt.Errorf("the bundle %s is damaged at its end: %w", path, err)
	}
	return b, nil
}

func (b *bundleSource) open() (*os.File, *tar.Reader, error) {
	f, r, err := b.openXZ()
	if err != nil {
		return nil, nil, err
	}
	return f, tar.NewReader(r), nil
}

func (b *bundleSource) openXZ() (*os.File, io.Reader, error) {
	// O_NONBLOCK: a bundle may sit in a home, where its owner could swap
	// in a FIFO that would hold the open, and the run, forever.
	f, err := os.OpenFile(b.path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("bundle: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("the bundle %s is not a regular file: pass the bundle file itself", b.path)
	}
	r, err := extract.NewReader(bufio.NewReaderSize(f, 64<<10), extract.XZ)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("the bundle %s is not an xz stream: %w", b.path, err)
	}
	return f, r, nil
}

// member finds url's member and returns a reader positioned at its bytes.
func (b *bundleSource) member(url string) (*os.File, *tar.Reader, int64, error) {
	name, ok := strings.CutPrefix(url, bundleScheme)
	if !ok {
		return nil, nil, 0, fmt.Errorf("%s is not in a bundle", url)
	}
	f, tr, err := b.open()
	if err != nil {
		return nil, nil, 0, err
	}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			f.Close()
			return nil, nil, 0, &NotFoundError{URL: b.path + ": " + name}
		}
		if err != nil {
			f.Close()
			return nil, nil, 0, fmt.Errorf("the bundle %s is damaged: %w", b.path, err)
		}
		if h.Name == name {
			return f, tr, h.Size, nil
		}
	}
}

func (b *bundleSource) small(ctx context.Context, url string) ([]byte, error) {
	return b.doc(ctx, url, maxSmall)
}

func (b *bundleSource) doc(_ context.Context, url string, limit int64) ([]byte, error) {
	f, tr, size, err := b.member(url)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > limit {
		return nil, fmt.Errorf("%s: %s is larger than %d bytes", b.path, url, limit)
	}
	return io.ReadAll(tr)
}

func (b *bundleSource) download(ctx context.Context, url string, dst *os.File, h hash.Hash, limit int64) (int64, error) {
	f, tr, size, err := b.member(url)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if limit >= 0 && size > limit {
		return 0, fmt.Errorf("%s: %s holds %d bytes, more than the expected %d (size mismatch)", b.path, url, size, limit)
	}
	return io.CopyBuffer(io.MultiWriter(dst, h), tr, make([]byte, 256<<10))
}

// bundleWant is a member to take out of a bundle: the file to write it to
// and the integrity it must have.
type bundleWant struct{ file, integrity string }

// extractMembers writes each wanted member (by name) to its file in dir in
// one pass over the bundle, each kept only when its sha512 is the
// integrity's; every wanted member must be there.
func (b *bundleSource) extractMembers(dir *os.File, want map[string]bundleWant) error {
	f, tr, err := b.open()
	if err != nil {
		return err
	}
	defer f.Close()
	for len(want) > 0 {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("the bundle %s is damaged: %w", b.path, err)
		}
		w, ok := want[h.Name]
		if !ok {
			continue
		}
		if err := copyVerified(tr, dir, w, b.path+": "+h.Name); err != nil {
			return err
		}
		delete(want, h.Name)
	}
	for name := range want {
		return &NotFoundError{URL: b.path + ": " + name}
	}
	return nil
}

// copyVerified writes r to w.file in dir through the hash, and keeps it
// only when its sha512 is w.integrity's.
func copyVerified(r io.Reader, dir *os.File, w bundleWant, what string) error {
	want, err := sha512Of(w.integrity)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	out, err := createIn(dir, w.file, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	h := sha512.New()
	if _, err := io.CopyBuffer(io.MultiWriter(out, h), r, make([]byte, 256<<10)); err != nil {
		return err
	}
	if got := h.Sum(nil); string(got) != string(want) {
		unix.Unlinkat(int(dir.Fd()), w.file, 0)
		return fmt.Errorf("%s: sha512 %s, but dist.integrity says %s (integrity mismatch): refusing it; nothing was installed (fix: make the bundle again)", what, base64.StdEncoding.EncodeToString(got), w.integrity)
	}
	return nil
}

// WriteBundle fetches the resolved releases of cfg.Agents, verified as for
// an install, and writes them with their manifests and checksum files into
// the offline bundle out (a tar.xz, written atomically).
func WriteBundle(ctx context.Context, cfg Config, out string) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	cfg.Bundle = ""
	platform := cfg.Platform
	if platform == "" {
		root, err := provision.OpenRoot("/")
		if err != nil {
			return err
		}
		platform, err = DetectPlatform(root)
		root.Close()
		if err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".cco-bundle-")
	if err != nil {
		return fmt.Errorf("bundle %s: %w", out, err)
	}
	defer os.RemoveAll(tmp)
	dir, err := os.Open(tmp)
	if err != nil {
		return err
	}
	defer dir.Close()
	src := newNetSource(cfg)
	idx := bundleIndex{Schema: BundleSchema, Agents: map[string]bundleEntry{}}
	small := map[string][]byte{}
	large := map[string]string{} // member -> file in tmp
	var order []string
	for _, a := range cfg.Agents {
		var err error
		switch rs := newReleaseSource(cfg, a).(type) {
		case *claudeStore:
			err = bundleClaude(ctx, src, cfg, platform, dir, &idx, small, large, &order)
		case *codexSource:
			err = bundleCodex(ctx, src, cfg, platform, dir, &idx, small, large, &order)
		case *npmSource:
			err = rs.bundle(ctx, src, platform, dir, &idx, small, large, &order)
		}
		if err != nil {
			return fmt.Errorf("bundle: %s: %w", a, err)
		}
	}
	return writeBundleFile(out, tmp, idx, small, large, order)
}

// writeBundleFile writes index, small documents, then the artifacts, so
// that reading a small document never decompresses an artifact.
func writeBundleFile(out, tmp string, idx bundleIndex, small map[string][]byte, large map[string]string, order []string) error {
	partial := out + ".partial"
	f, err := os.OpenFile(partial, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("bundle %s: %w", out, err)
	}
	ok := false
	defer func() {
		f.Close()
		if !ok {
			os.Remove(partial)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	xw, err := xz.WriterConfig{DictCap: 8 << 20}.NewWriter(bw)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(xw)
	ib, _ := json.MarshalIndent(idx, "", "  ")
	add := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Size: size, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	if err := add(bundleIndexName, int64(len(ib)), strings.NewReader(string(ib))); err != nil {
		return err
	}
	for _, a := range vendorAgents {
		for _, name := range idx.Agents[a.name].Files {
			if b, isSmall := small[name]; isSmall {
				if err := add(name, int64(len(b)), strings.NewReader(string(b))); err != nil {
					return err
				}
			}
		}
	}
	for _, name := range order {
		lf, err := os.Open(filepath.Join(tmp, large[name]))
		if err != nil {
			return err
		}
		fi, err := lf.Stat()
		if err == nil {
			err = add(name, fi.Size(), lf)
		}
		lf.Close()
		if err != nil {
			return fmt.Errorf("bundle %s: writing %s: %w", out, name, err)
		}
	}
	for _, c := range []io.Closer{tw, xw} {
		if err := c.Close(); err != nil {
			return fmt.Errorf("bundle %s: %w", out, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := os.Rename(partial, out); err != nil {
		return fmt.Errorf("bundle %s: %w", out, err)
	}
	ok = true
	return nil
}

// CheckBundle is the quick look a preflight takes at a bundle: readable, xz,
// and starting with cco's index. The whole stream is checked when it is used.
func CheckBundle(path string) error {
	b := &bundleSource{path: path}
	f, xr, err := b.openXZ()
	if err != nil {
		return err
	}
	defer f.Close()
	if h, err := tar.NewReader(xr).Next(); err != nil || h.Name != bundleIndexName {
		return fmt.Errorf("the bundle %s does not start with %s: not a cco bundle (make one with cco-install bundle --out FILE.tar.xz)", path, bundleIndexName)
	}
	return nil
}
