package extract

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// entry is one member of a test archive.
type entry struct {
	name, link string
	typ        byte
	mode       int64
	body       string
}

func tarOf(t testing.TB, es ...entry) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Uid: 1001, Gid: 1001, Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.body != "" {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	var o bytes.Buffer
	w := gzip.NewWriter(&o)
	w.Write(b)
	w.Close()
	return o.Bytes()
}

func zst(t testing.TB, b []byte) []byte {
	var o bytes.Buffer
	w, err := zstd.NewWriter(&o)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return o.Bytes()
}

func xzOf(t testing.TB, b []byte) []byte {
	var o bytes.Buffer
	w, err := xz.NewWriter(&o)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return o.Bytes()
}

// staging makes <tmp>/stage and returns it open, plus <tmp>.
func staging(t testing.TB) (*os.File, string) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "stage")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, parent
}

var codexTree = []entry{
	{name: "./", typ: tar.TypeDir, mode: 0o755},
	{name: "./codex-package.json", body: `{"layoutVersion":1}`},
	{name: "./bin/", typ: tar.TypeDir, mode: 0o775},
	{name: "./bin/codex", body: "ELF codex", mode: 0o775},
	{name: "./codex-path/rg", body: "ELF rg", mode: 0o755},
	{name: "./bin/codex-alias", typ: tar.TypeSymlink, link: "codex"},
	{name: "./bin/codex-hard", typ: tar.TypeLink, link: "./bin/codex"},
}

func TestExtractFormats(t *testing.T) {
	plain := tarOf(t, codexTree...)
	for name, data := range map[string][]byte{"tar": plain, "gz": gz(t, plain), "zst": zst(t, plain), "xz": xzOf(t, plain)} {
		t.Run(name, func(t *testing.T) {
			dir, _ := staging(t)
			res, err := Extract(bytes.NewReader(data), dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			root := dir.Name()
			b, err := os.ReadFile(filepath.Join(root, "bin/codex"))
			if err != nil || string(b) != "ELF codex" {
				t.Fatalf("bin/codex = %q, %v", b, err)
			}
			fi, _ := os.Stat(filepath.Join(root, "bin/codex"))
			if fi.Mode().Perm() != 0o755 {
				t.Errorf("bin/codex mode %v: group write must be dropped", fi.Mode())
			}
			fi, _ = os.Stat(filepath.Join(root, "bin"))
			if fi.Mode().Perm()&0o022 != 0 {
				t.Errorf("bin mode %v is group/other-writable", fi.Mode())
			}
			if l, _ := os.Readlink(filepath.Join(root, "bin/codex-alias")); l != "codex" {
				t.Errorf("symlink = %q", l)
			}
			a, _ := os.Stat(filepath.Join(root, "bin/codex"))
			h, _ := os.Stat(filepath.Join(root, "bin/codex-hard"))
			if !os.SameFile(a, h) {
				t.Error("hardlink is not the same file")
			}
			names := map[string]Member{}
			for _, m := range res.Members {
				names[m.Name] = m
			}
			if names["codex-path/rg"].SHA256 == "" || names["bin/codex-hard"].SHA256 != names["bin/codex"].SHA256 {
				t.Errorf("members lack hashes: %+v", res.Members)
			}
			if m, ok := names["codex-path"]; !ok || m.Kind != KindDir {
				t.Error("the implied directory codex-path is not listed")
			}
		})
	}
}

func TestExtractOwnersNotRestored(t *testing.T) {
	dir, _ := staging(t)
	if _, err := Extract(bytes.NewReader(tarOf(t, codexTree...)), dir, 0); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(dir.Name(), func(p string, d fs.DirEntry, err error) error {
		fi, _ := os.Lstat(p)
		if uid := statUID(fi); uid != os.Geteuid() {
			t.Errorf("%s owned by %d, want %d (never the archive's 1001)", p, uid, os.Geteuid())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSetuidStrippedAndReported(t *testing.T) {
	dir, _ := staging(t)
	res, err := Extract(bytes.NewReader(tarOf(t, entry{name: "bin/su", body: "x", mode: 0o4755}, entry{name: "bin/sg", body: "y", mode: 0o2755})), dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(dir.Name(), "bin/su"))
	if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		t.Errorf("setuid kept: %v", fi.Mode())
	}
	if strings.Join(res.Stripped, ",") != "bin/su,bin/sg" {
		t.Errorf("stripped = %v", res.Stripped)
	}
}

// hostile are archives the extractor must refuse, with the member named.
var hostile = map[string][]entry{
	"absolute":            {{name: "/etc/passwd", body: "x"}},
	"dotdot":              {{name: "a/../../evil", body: "x"}},
	"symlink absolute":    {{name: "l", typ: tar.TypeSymlink, link: "/etc"}},
	"symlink escapes":     {{name: "a/l", typ: tar.TypeSymlink, link: "../../etc"}},
	"symlink then write":  {{name: "l", typ: tar.TypeSymlink, link: "."}, {name: "l/x", body: "x"}},
	"symlink chain climb": {{name: "d/e/l", typ: tar.TypeSymlink, link: "../.."}, {name: "m", typ: tar.TypeSymlink, link: "d/e/l/../.."}},
	"hardlink outside":    {{name: "h", typ: tar.TypeLink, link: "../etc/passwd"}},
	"hardlink absolute":   {{name: "h", typ: tar.TypeLink, link: "/etc/passwd"}},
	"hardlink missing":    {{name: "h", typ: tar.TypeLink, link: "nothere"}},
	"hardlink to dir":     {{name: "d", typ: tar.TypeDir}, {name: "h", typ: tar.TypeLink, link: "d"}},
	"device":              {{name: "dev", typ: tar.TypeChar}},
	"block":               {{name: "blk", typ: tar.TypeBlock}},
	"fifo":                {{name: "fifo", typ: tar.TypeFifo}},
	"duplicate":           {{name: "a", body: "1"}, {name: "./a", body: "2"}},
	"file over dir":       {{name: "d/x", body: "1"}, {name: "d", body: "2"}},
	"under a file":        {{name: "f", body: "1"}, {name: "f/x", body: "2"}},
	"bomb":                {{name: "big", body: strings.Repeat("0", 5000)}},
}

func TestHostileArchivesRefused(t *testing.T) {
	for name, es := range hostile {
		t.Run(name, func(t *testing.T) {
			dir, parent := staging(t)
			_, err := ExtractTar(bytes.NewReader(tarOf(t, es...)), dir, 4096)
			if err == nil {
				t.Fatal("extracted a hostile archive")
			}
			last := strings.TrimPrefix(es[len(es)-1].name, "./")
			if !strings.Contains(err.Error(), last) {
				t.Errorf("error %q does not name the member %q", err, last)
			}
			if name == "bomb" && !errors.Is(err, ErrLimit) {
				t.Errorf("bomb error %v is not ErrLimit", err)
			}
			assertContained(t, parent)
		})
	}
}

func TestBombStopsEarly(t *testing.T) {
	// 1 GiB of zeros compress to about 1 MiB; the limit must stop the
	// decoder long before it produces all of it.
	pr, pw := io.Pipe()
	go func() {
		zw, _ := zstd.NewWriter(pw)
		tw := tar.NewWriter(zw)
		tw.WriteHeader(&tar.Header{Name: "zeros", Size: 1 << 30, Mode: 0o644, Typeflag: tar.TypeReg})
		buf := make([]byte, 1<<20)
		for i := 0; i < 1<<10; i++ {
			if _, err := tw.Write(buf); err != nil {
				break
			}
		}
		tw.Close()
		zw.Close()
		pw.Close()
	}()
	dir, _ := staging(t)
	_, err := Extract(pr, dir, 1<<20)
	pr.CloseWithError(errors.New("done"))
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("err = %v, want the size limit", err)
	}
	if fi, err := os.Stat(filepath.Join(dir.Name(), "zeros")); err == nil && fi.Size() > 1<<20 {
		t.Errorf("wrote %d bytes past the limit", fi.Size())
	}
}

func TestZstdWindowCapped(t *testing.T) {
	// A frame header that declares a 1 GiB window must be refused, not allocated.
	var o bytes.Buffer
	w, _ := zstd.NewWriter(&o, zstd.WithWindowSize(1<<29), zstd.WithSingleSegment(false))
	w.Write(bytes.Repeat([]byte("a"), 1<<16))
	w.Close()
	dir, _ := staging(t)
	if _, err := Extract(bytes.NewReader(o.Bytes()), dir, 0); err == nil {
		t.Fatal("accepted a zstd frame with a 512 MiB window")
	}
}

func TestXZDictCapped(t *testing.T) {
	var o bytes.Buffer
	w, err := xz.WriterConfig{DictCap: 256 << 20}.NewWriter(&o)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(tarOf(t, entry{name: "a", body: "x"}))
	w.Close()
	dir, _ := staging(t)
	_, err = Extract(bytes.NewReader(o.Bytes()), dir, 0)
	if err == nil || !strings.Contains(err.Error(), "dictionary") {
		t.Fatalf("err = %v, want the dictionary refused", err)
	}
}

func TestUnknownFormat(t *testing.T) {
	dir, _ := staging(t)
	if _, err := Extract(strings.NewReader("<html>not found</html>"), dir, 0); err == nil {
		t.Fatal("accepted an HTML page as an archive")
	}
}

// assertContained checks that parent holds nothing but the staging
// directory, and that no link in it resolves outside.
func assertContained(t testing.TB, parent string) {
	t.Helper()
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "stage" {
		names := []string{}
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("written outside the staging directory: %v", names)
	}
	stage := filepath.Join(parent, "stage")
	filepath.WalkDir(stage, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if rel, _ := filepath.Rel(stage, real); rel == ".." || strings.HasPrefix(rel, "../") {
				t.Errorf("symlink %s resolves outside to %s", p, real)
			}
		}
		return nil
	})
}

// A regular file named twice: refused by default; with LastFileWins (npm
// packages, as npm's tar takes them) the last copy is the file and the one
// member; a duplicate that is a link, or a file over a directory or a
// link, is refused either way.
func TestLastFileWins(t *testing.T) {
	twice := tarOf(t, entry{name: "package/a.js", body: "first"}, entry{name: "package/a.js", body: "second copy"})
	dir, _ := staging(t)
	if _, err := Extract(bytes.NewReader(twice), dir, 0); err == nil || !strings.Contains(err.Error(), "duplicate name") {
		t.Errorf("default: %v", err)
	}
	dir, parent := staging(t)
	res, err := ExtractWith(bytes.NewReader(twice), dir, 0, Options{LastFileWins: true})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(parent, "stage/package/a.js")); string(b) != "second copy" {
		t.Errorf("content %q", b)
	}
	n := 0
	for _, m := range res.Members {
		if m.Name == "package/a.js" {
			n++
			if m.Size != int64(len("second copy")) {
				t.Errorf("member %+v", m)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d members for the file: %+v", n, res.Members)
	}
	for _, es := range [][]entry{
		{{name: "p/a", body: "x"}, {name: "p/a", typ: tar.TypeSymlink, link: "/etc/passwd"}},
		{{name: "p/a", typ: tar.TypeSymlink, link: "b"}, {name: "p/a", body: "x"}},
		{{name: "p/d/", typ: tar.TypeDir, mode: 0o755}, {name: "p/d", body: "x"}},
	} {
		d, _ := staging(t)
		if _, err := ExtractWith(bytes.NewReader(tarOf(t, es...)), d, 0, Options{LastFileWins: true}); err == nil {
			t.Errorf("%+v: accepted", es)
		}
	}
}
