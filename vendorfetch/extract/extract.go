package extract

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultLimit is the default cap on the bytes an archive may unpack to.
const DefaultLimit int64 = 4 << 30

// headerCost is what each member counts against the limit besides its
// bytes, so that a bomb of millions of empty members also stops.
const headerCost = 512

// Kinds of extracted members.
const (
	KindFile = "file"
	KindDir  = "dir"
	KindLink = "link"
)

// Member is one extracted entry.
type Member struct {
	Name   string // slash-separated, relative to the staging directory, no "./"
	Kind   string
	Mode   fs.FileMode // permission bits as written
	Size   int64
	SHA256 string // of a file's bytes
	Target string // a symlink's target
}

// Result lists what was extracted, in archive order, including the
// directories that members implied without an entry of their own.
type Result struct {
	Members []Member
	// Stripped names the members whose setuid/setgid bits were removed.
	Stripped []string
}

// Error is a refusal that names the member.
type Error struct {
	Member string
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("archive member %q: %s", e.Member, e.Reason) }

func refuse(name, format string, args ...any) error {
	return &Error{Member: name, Reason: fmt.Sprintf(format, args...)}
}

// ErrLimit is wrapped by the error of an archive that unpacks to more than
// the limit.
var ErrLimit = errors.New("the archive unpacks to more than the size limit")

// Extract decompresses r (any Format) and unpacks it into dir, an open
// directory. limit caps the unpacked bytes (0 means DefaultLimit). On error
// dir may hold part of the archive: the caller removes the staging
// directory. Nothing is ever written outside dir.
func Extract(r io.Reader, dir *os.File, limit int64) (*Result, error) {
	return ExtractWith(r, dir, limit, Options{})
}

// Options change what an extraction accepts.
type Options struct {
	// LastFileWins takes a regular file that the archive names twice from
	// its last copy, as npm's tar does (real npm packages hold such
	// duplicates); every other duplicate is still refused.
	LastFileWins bool
}

// ExtractWith is Extract with options.
func ExtractWith(r io.Reader, dir *os.File, limit int64, o Options) (*Result, error) {
	dr, _, err := Decompress(r)
	if err != nil {
		return nil, err
	}
	defer dr.Close()
	return extractTar(dr, dir, limit, o)
}

type extractor struct {
	opts   Options
	dirfd  int
	limit  int64
	used   int64
	kinds  map[string]string // name -> kind, for every member and implied dir
	named  map[string]bool   // names that appeared as members
	res    *Result
	buf    []byte
	hashes map[string]Member
	index  map[string]int // name -> position in res.Members
}

// ExtractTar unpacks an uncompressed tar stream into dir.
func ExtractTar(r io.Reader, dir *os.File, limit int64) (*Result, error) {
	return extractTar(r, dir, limit, Options{})
}

func extractTar(r io.Reader, dir *os.File, limit int64, o Options) (*Result, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	x := &extractor{
		opts: o, dirfd: int(dir.Fd()), limit: limit,
		kinds: map[string]string{"": KindDir}, named: map[string]bool{},
		res: &Result{}, buf: make([]byte, 256<<10), hashes: map[string]Member{}, index: map[string]int{},
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the archive: %w", err)
		}
		if err := x.member(tr, h); err != nil {
			return nil, err
		}
	}
	if err := x.checkLinks(); err != nil {
		x.dropLinks()
		return nil, err
	}
	return x.res, nil
}

// cleanName turns an archive name into a relative slash path, accepting a
// leading "./" and refusing anything that could point outside.
func cleanName(raw string) (string, error) {
	if raw == "" {
		return "", refuse(raw, "empty name")
	}
	if strings.ContainsRune(raw, 0) || strings.Contains(raw, "\\") {
		return "", refuse(raw, "the name holds a NUL or a backslash")
	}
	if strings.HasPrefix(raw, "/") {
		return "", refuse(raw, "absolute names are refused")
	}
	n := strings.TrimRight(raw, "/")
	var parts []string
	for _, c := range strings.Split(n, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return "", refuse(raw, "'..' components are refused")
		}
		parts = append(parts, c)
	}
	return strings.Join(parts, "/"), nil
}

func (x *extractor) charge(name string, n int64) error {
	x.used += n
	if x.used > x.limit {
		return fmt.Errorf("%w (%d bytes) at member %q: refusing it as a decompression bomb (raise the unpack limit if the archive is genuine)", ErrLimit, x.limit, name)
	}
	return nil
}

func (x *extractor) member(tr *tar.Reader, h *tar.Header) error {
	if h.Typeflag == tar.TypeXGlobalHeader {
		return x.charge(h.Name, headerCost) // pax global metadata: nothing to create
	}
	name, err := cleanName(h.Name)
	if err != nil {
		return err
	}
	if err := x.charge(h.Name, headerCost); err != nil {
		return err
	}
	if name == "" {
		if h.Typeflag == tar.TypeDir {
			return nil // the "./" entry of `tar -C dir .`
		}
		return refuse(h.Name, "the name is empty after cleaning")
	}
	if x.named[name] {
		if !x.opts.LastFileWins || h.Typeflag != tar.TypeReg || x.kinds[name] != KindFile {
			return refuse(h.Name, "duplicate name: the archive holds it twice")
		}
		// The earlier copy goes; the new one is written as any file.
		pfd, base, err := x.parentFD(h.Name, name)
		if err != nil {
			return err
		}
		err = unix.Unlinkat(pfd, base, 0)
		unix.Close(pfd)
		if err != nil {
			return refuse(h.Name, "removing its earlier copy: %v", err)
		}
		delete(x.kinds, name)
	}
	if k, ok := x.kinds[name]; ok && !(k == KindDir && h.Typeflag == tar.TypeDir) {
		return refuse(h.Name, "duplicate name: it was already created as a %s", k)
	}
	x.named[name] = true
	if err := x.parents(h.Name, name); err != nil {
		return err
	}
	perm := fs.FileMode(h.Mode).Perm() &^ 0o022 // nothing group/other-writable
	if h.Mode&(0o4000|0o2000) != 0 {
		x.res.Stripped = append(x.res.Stripped, name)
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if x.kinds[name] == KindDir { // implied by an earlier member
			if err := x.chmod(h.Name, name, perm|0o700, 0); err != nil {
				return err
			}
			x.res.Members[x.index[name]].Mode = perm | 0o700
			return nil
		}
		if err := x.mkdir(h.Name, name, perm|0o700); err != nil {
			return err
		}
		x.add(Member{Name: name, Kind: KindDir, Mode: perm | 0o700})
	case tar.TypeReg:
		return x.file(tr, h, name, perm|0o400)
	case tar.TypeSymlink:
		return x.symlink(h, name)
	case tar.TypeLink:
		return x.hardlink(h, name)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return refuse(h.Name, "device and fifo entries are refused")
	default:
		return refuse(h.Name, "entries of tar type %q are refused", string(h.Typeflag))
	}
	return nil
}

func (x *extractor) add(m Member) {
	x.kinds[m.Name] = m.Kind
	if i, ok := x.index[m.Name]; ok {
		x.res.Members[i] = m // a later copy of a file (LastFileWins)
		return
	}
	x.index[m.Name] = len(x.res.Members)
	x.res.Members = append(x.res.Members, m)
}

// parents creates the missing directories above name. A parent that is a
// symlink or a file is refused: members never go through links.
func (x *extractor) parents(raw, name string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	var missing []string
	for d := dir; d != "."; d = path.Dir(d) {
		k, ok := x.kinds[d]
		if ok {
			if k != KindDir {
				return refuse(raw, "its parent %q is a %s, not a directory", d, k)
			}
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := x.mkdir(raw, missing[i], 0o755); err != nil {
			return err
		}
		x.add(Member{Name: missing[i], Kind: KindDir, Mode: 0o755})
	}
	return nil
}

// parentFD opens name's parent beneath the staging directory, refusing any
// symlink on the way (defence in depth: the kinds map already does).
func (x *extractor) parentFD(raw, name string) (int, string, error) {
	dir, base := path.Split(name)
	if dir == "" {
		dir = "."
	}
	// EINTR and EAGAIN (a concurrent rename somewhere) are retried a few
	// times only: an endless retry would hang the installer.
	for try := 0; ; try++ {
		fd, err := unix.Openat2(x.dirfd, dir, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if (err == unix.EINTR || err == unix.EAGAIN) && try < 100 {
			continue
		}
		if err != nil {
			return -1, "", refuse(raw, "opening its directory: %v", err)
		}
		return fd, base, nil
	}
}

func (x *extractor) mkdir(raw, name string, perm fs.FileMode) error {
	pfd, base, err := x.parentFD(raw, name)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, base, uint32(perm)); err != nil {
		return refuse(raw, "creating the directory: %v", err)
	}
	return x.chmod(raw, name, perm, pfd)
}

// chmod sets perm exactly (the umask must not decide it). pfd is name's
// parent, or 0 to open it.
func (x *extractor) chmod(raw, name string, perm fs.FileMode, pfd int) error {
	if pfd == 0 {
		fd, _, err := x.parentFD(raw, name)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		pfd = fd
	}
	if err := unix.Fchmodat(pfd, path.Base(name), uint32(perm), 0); err != nil {
		return refuse(raw, "setting its mode: %v", err)
	}
	return nil
}

func (x *extractor) file(tr *tar.Reader, h *tar.Header, name string, perm fs.FileMode) error {
	if h.Size < 0 {
		return refuse(h.Name, "negative size")
	}
	if x.used+h.Size > x.limit {
		return x.charge(h.Name, h.Size)
	}
	pfd, base, err := x.parentFD(h.Name, name)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return refuse(h.Name, "creating the file: %v", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	sum := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(f, sum), io.LimitReader(tr, h.Size), x.buf)
	if err != nil {
		return refuse(h.Name, "writing it: %v", err)
	}
	if n != h.Size {
		return refuse(h.Name, "the archive ends inside it (%d of %d bytes)", n, h.Size)
	}
	if err := x.charge(h.Name, n); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return refuse(h.Name, "setting its mode: %v", err)
	}
	if err := f.Close(); err != nil {
		return refuse(h.Name, "closing it: %v", err)
	}
	m := Member{Name: name, Kind: KindFile, Mode: perm, Size: n, SHA256: hex.EncodeToString(sum.Sum(nil))}
	x.hashes[name] = m
	x.add(m)
	return nil
}

func (x *extractor) symlink(h *tar.Header, name string) error {
	t := h.Linkname
	if t == "" || strings.ContainsRune(t, 0) {
		return refuse(h.Name, "empty or NUL symlink target")
	}
	if strings.HasPrefix(t, "/") {
		return refuse(h.Name, "the symlink target %q is absolute: it leaves the tree", t)
	}
	if p := path.Clean(path.Join(path.Dir(name), t)); p == ".." || strings.HasPrefix(p, "../") {
		return refuse(h.Name, "the symlink target %q leaves the tree", t)
	}
	if err := x.walkTarget(Member{Name: name, Target: t}); err != nil {
		return err
	}
	pfd, base, err := x.parentFD(h.Name, name)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Symlinkat(t, pfd, base); err != nil {
		return refuse(h.Name, "creating the symlink: %v", err)
	}
	x.add(Member{Name: name, Kind: KindLink, Mode: 0o777, Target: t})
	return nil
}

func (x *extractor) hardlink(h *tar.Header, name string) error {
	target, err := cleanName(h.Linkname)
	if err != nil {
		return refuse(h.Name, "the hardlink target %q is refused: %v", h.Linkname, err)
	}
	src, ok := x.hashes[target]
	if !ok {
		if x.kinds[target] != "" {
			return refuse(h.Name, "the hardlink target %q is a %s, not a file", h.Linkname, x.kinds[target])
		}
		return refuse(h.Name, "the hardlink target %q is not an earlier member of the archive", h.Linkname)
	}
	spfd, sbase, err := x.parentFD(h.Name, target)
	if err != nil {
		return err
	}
	defer unix.Close(spfd)
	pfd, base, err := x.parentFD(h.Name, name)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Linkat(spfd, sbase, pfd, base, 0); err != nil {
		return refuse(h.Name, "creating the hardlink: %v", err)
	}
	m := src
	m.Name = name
	x.hashes[name] = m
	x.add(m)
	return nil
}

// checkLinks refuses a symlink whose target walks through another symlink:
// each target is checked lexically when it is created, but a "../.." after
// a link that points higher up than its own name could still climb out.
// Done at the end because a target may name a member that comes later.
func (x *extractor) checkLinks() error {
	links := []Member{}
	for _, m := range x.res.Members {
		if m.Kind == KindLink {
			links = append(links, m)
		}
	}
	sort.Slice(links, func(i, j int) bool { return links[i].Name < links[j].Name })
	for _, l := range links {
		if err := x.walkTarget(l); err != nil {
			return err
		}
	}
	return nil
}

// dropLinks unlinks every extracted symlink, so that a refused archive
// leaves no link in the staging directory that points out of it.
func (x *extractor) dropLinks() {
	for _, m := range x.res.Members {
		if m.Kind != KindLink {
			continue
		}
		if pfd, base, err := x.parentFD(m.Name, m.Name); err == nil {
			unix.Unlinkat(pfd, base, 0)
			unix.Close(pfd)
		}
	}
}

// walkTarget follows l's target component by component from l's directory
// and refuses it when it climbs out or passes through another symlink.
func (x *extractor) walkTarget(l Member) error {
	var stack []string
	if d := path.Dir(l.Name); d != "." {
		stack = strings.Split(d, "/")
	}
	comps := strings.Split(l.Target, "/")
	for i, c := range comps {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return refuse(l.Name, "the symlink target %q leaves the tree", l.Target)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		stack = append(stack, c)
		if i < len(comps)-1 && x.kinds[strings.Join(stack, "/")] == KindLink {
			return refuse(l.Name, "the symlink target %q goes through the symlink %q", l.Target, strings.Join(stack, "/"))
		}
	}
	return nil
}
