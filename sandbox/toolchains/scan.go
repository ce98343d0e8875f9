package toolchains

import (
	"errors"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Budget is how many directory entries Scan reads, over all the trees of
// one launch, before it stops: the walk runs at every launch, so its cost
// is bounded (ADR 125). Measured on this kind of machine, loaded, reading
// costs about 2 µs an entry in the kernel (find(1) pays the same), so the
// whole budget is about 100 ms; nvm, SDKMAN!, pipx and uv's tools with a
// few versions each fit in it, a rustup toolchain with its docs (120,000
// entries) does not, and the part left is named at launch.
const Budget = 50000

// Found is a credential file in a bound tree.
type Found struct {
	// Path is its absolute path on the host (and in the jail).
	Path string
	// Name is the credential name it matched (its Credentials entry).
	Name string
	// Link: Path is a symbolic link so named; the caller decides what
	// the jail shows of its target.
	Link bool
}

// Scanned is what Scan saw.
type Scanned struct {
	// Found are the regular files and the links whose name is a
	// credential's.
	Found []Found
	// Entries is how many directory entries were read.
	Entries int
	// Unsearched are the directories the budget left unread (absolute),
	// shallowest first: the jail shows them, unsearched.
	Unsearched []string
}

// credNames maps the lower-case name of each credential to its entry;
// names are matched without regard to case (NuGet reads NuGet.Config,
// nuget.config and NuGet.config alike).
var credNames, credLens = func() (map[string]string, [256]bool) {
	m := map[string]string{}
	var lens [256]bool
	for _, c := range Credentials {
		m[strings.ToLower(c.Name)] = c.Name
		lens[len(c.Name)] = true
	}
	return m, lens
}()

// match returns the credential name b matches, if any.
func match(b []byte) (string, bool) {
	if len(b) >= 256 || !credLens[len(b)] {
		return "", false
	}
	var low [256]byte
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		low[i] = c
	}
	n, ok := credNames[string(low[:len(b)])]
	return n, ok
}

// Scan walks the trees (absolute directories), breadth first, and finds
// every file whose name is a credential's, at any depth, reading at most
// budget directory entries in all. It reads with getdents on descriptors
// opened beneath each tree without following a link (a link to a
// directory is not walked: the jail shows what it points to only where
// that is bound, and a bound tree is walked on its own). A directory it
// cannot list but can search has each credential name looked up in it.
// A tree it cannot open is skipped (the jail cannot show it either).
func Scan(trees []string, budget int) Scanned {
	var s Scanned
	buf := make([]byte, 32<<10)
	type dir struct {
		root int    // the tree's descriptor
		rel  string // below it ("." for the tree)
		abs  string
	}
	var queue []dir
	var roots []int
	defer func() {
		for _, fd := range roots {
			unix.Close(fd)
		}
	}()
	for _, t := range trees {
		if within(t, trees) {
			continue // walked as part of the tree that holds it
		}
		// Readable: the tree's own listing is read on it, saving an open.
		fd, err := unix.Open(t, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EACCES) {
			fd, err = unix.Open(t, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		if errors.Is(err, unix.ENOTDIR) {
			// A tree that is one file (~/.tool-versions), itself named
			// as a credential.
			var st unix.Stat_t
			if c, ok := match([]byte(filepath.Base(t))); ok && unix.Lstat(t, &st) == nil && dtype(st.Mode) == unix.DT_REG {
				s.Found = append(s.Found, Found{Path: t, Name: c})
			}
		}
		if err != nil {
			continue
		}
		roots = append(roots, fd)
		queue = append(queue, dir{fd, ".", t})
	}
	for i := 0; i < len(queue); i++ {
		d := queue[i]
		if s.Entries >= budget {
			for _, u := range queue[i:] {
				s.Unsearched = append(s.Unsearched, u.abs)
			}
			break
		}
		fd, err := d.root, error(nil)
		if d.rel != "." {
			fd, err = unix.Openat2(d.root, d.rel, &unix.OpenHow{
				Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
				Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
			})
		}
		if errors.Is(err, unix.EACCES) {
			s.lookUp(d.root, d.rel, d.abs)
			continue
		}
		if err != nil {
			continue // gone, or replaced by a link since it was listed
		}
		complete := true
	read:
		for {
			n, err := unix.Getdents(fd, buf)
			if errors.Is(err, unix.EBADF) && fd == d.root {
				// A tree that can be searched but not listed: opened
				// O_PATH.
				s.lookUp(d.root, ".", d.abs)
			}
			if err != nil || n <= 0 {
				break
			}
			for off := 0; off < n; {
				// struct linux_dirent64: ino u64, off s64, reclen u16,
				// type u8, name NUL-terminated.
				reclen := int(*(*uint16)(unsafe.Pointer(&buf[off+16])))
				typ := buf[off+18]
				name := buf[off+19 : off+reclen]
				if z := indexNUL(name); z >= 0 {
					name = name[:z]
				}
				off += reclen
				if len(name) == 1 && name[0] == '.' || len(name) == 2 && name[0] == '.' && name[1] == '.' {
					continue
				}
				if s.Entries >= budget {
					complete = false
					break read
				}
				s.Entries++
				if typ == unix.DT_UNKNOWN {
					var st unix.Stat_t
					if unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
						continue
					}
					typ = dtype(st.Mode)
				}
				switch typ {
				case unix.DT_DIR:
					queue = append(queue, dir{d.root, join(d.rel, string(name)), d.abs + "/" + string(name)})
				case unix.DT_REG, unix.DT_LNK:
					if c, ok := match(name); ok {
						s.Found = append(s.Found, Found{Path: d.abs + "/" + string(name), Name: c, Link: typ == unix.DT_LNK})
					}
				}
			}
		}
		if fd != d.root {
			unix.Close(fd)
		}
		if !complete {
			s.Unsearched = append(s.Unsearched, d.abs)
		}
	}
	return s
}

// lookUp looks each credential name up in a directory that can be
// searched but not listed (mode 0711): a session that guesses the name
// reads the file.
func (s *Scanned) lookUp(root int, rel, abs string) {
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return
	}
	defer unix.Close(fd)
	for _, c := range Credentials {
		// The spellings a tool looks for; a guess at any other finds
		// nothing the tool would read.
		for _, n := range spellings(c.Name) {
			var st unix.Stat_t
			if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			if t := dtype(st.Mode); t == unix.DT_REG || t == unix.DT_LNK {
				s.Found = append(s.Found, Found{Path: abs + "/" + n, Name: c.Name, Link: t == unix.DT_LNK})
			}
		}
	}
}

// spellings are name and its lower-case form (NuGet's nuget.config,
// NuGet.config and NuGet.Config).
func spellings(name string) []string {
	l := strings.ToLower(name)
	if l == name {
		return []string{name}
	}
	out := []string{name, l}
	if name == "NuGet.Config" {
		out = append(out, "NuGet.config")
	}
	return out
}

// within reports whether t lies below another of trees.
func within(t string, trees []string) bool {
	for _, o := range trees {
		if o != t && strings.HasPrefix(t, o+"/") {
			return true
		}
	}
	return false
}

func dtype(mode uint32) uint8 {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFLNK:
		return unix.DT_LNK
	}
	return unix.DT_UNKNOWN
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

func join(rel, name string) string {
	if rel == "." {
		return name
	}
	return rel + "/" + name
}

// Rel is p below home in the "~/" form, for messages.
func Rel(home, p string) string {
	if r, err := filepath.Rel(home, p); err == nil && !strings.HasPrefix(r, "..") {
		return "~/" + r
	}
	return p
}
