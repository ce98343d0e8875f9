package sandbox

import (
	"bytes"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/sandbox/hostview"
)

// A read-only mount does not stop connect(2) on a unix socket: the write
// check skips sockets. So every host socket the jail could see is masked
// (/dev/null over it: connect then fails with EINVAL). The host network
// namespace's /proc/net/unix lists the bound pathname sockets, cheaply; the
// launcher runs there, so its view is the host's.

// procNetUnix is read for the list where sock_diag cannot give it (and
// by tests, which point it at a file of their own).
var procNetUnix = "/proc/net/unix"

// hostSockets lists the host's bound pathname sockets: sock_diag's binary
// dump where it answers (several times cheaper on a host with thousands),
// else /proc/net/unix.
func hostSockets() []string {
	if procNetUnix == "/proc/net/unix" {
		if ps, err := hostview.UnixSocketPaths(); err == nil {
			return ps
		}
	}
	b, err := os.ReadFile(procNetUnix)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range bytes.Split(b, []byte("\n"))[1:] {
		if p := socketPath(line); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// socketMasks are the masks for the listed host sockets the jail would
// otherwise see. Outside the trees bound read-write, a directory that holds
// sockets is masked as a whole (one mount however many sockets are in it,
// and none that can vanish while bwrap builds the jail): where it holds a
// bind, it becomes private before anything is bound, so that the binds
// are made inside it. Sockets one by one are masked only where a whole
// directory must stay: in the trees bound read-write (the user's own) and
// in the system's top directories, where only root makes sockets. Another
// user can make sockets only in world-writable directories or their own
// home (hidden): no count of them adds more than one mount a directory.
func socketMasks(s *Spec) []Mask {
	socks := hostSockets()
	if len(socks) == 0 {
		return nil
	}
	rw := s.readWriteTrees()
	binds := s.bindTargets()
	// By directory: a directory's visibility is decided once, and only a
	// socket masked on its own is looked at (lstat) one by one.
	byDir := map[string][]string{}
	for _, p := range socks {
		// The paths are clean: the directory is what precedes the last
		// "/" (filepath.Dir would clean each again).
		d := p[:max(strings.LastIndexByte(p, '/'), 1)]
		byDir[d] = append(byDir[d], p)
	}
	var out []Mask
	dirs := map[string]bool{}
	for d, ps := range byDir {
		if under(ps[0], s.Private) || !s.hostVisible(ps[0]) {
			continue
		}
		if !under(ps[0], rw) && !systemTop[d] {
			if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
				dirs[d] = true
			}
			continue
		}
		seen := map[string]bool{}
		for _, p := range ps {
			if seen[p] || !s.hostVisible(p) {
				continue
			}
			seen[p] = true
			if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSocket != 0 {
				out = append(out, Mask{Path: p, Kind: MaskFile, Socket: true})
			}
		}
	}
	slices.SortFunc(out, func(a, b Mask) int { return strings.Compare(a.Path, b.Path) })
	sorted := slices.Sorted(maps.Keys(dirs))
	for _, d := range sorted {
		if under(d, sorted) {
			continue // its parent is masked already
		}
		if slices.ContainsFunc(binds, func(b string) bool { return paths.Within(b, d) }) {
			s.Private = append(s.Private, d)
		} else {
			out = append(out, Mask{Path: d, Kind: MaskDir})
		}
	}
	return out
}

// systemTop are the directories a whole mask would take too much from:
// only root makes sockets in them, and few.
var systemTop = map[string]bool{"/": true, "/var": true, "/var/lib": true, "/srv": true, "/opt": true, "/usr": true,
	"/etc": true, "/home": true, "/mnt": true, "/media": true, "/var/spool": true, "/var/cache": true}

// readWriteTrees are the jail paths bound read-write from the host.
func (s *Spec) readWriteTrees() []string {
	var out []string
	s.eachBind(func(b *Bind, rw bool) {
		if rw && b.Src != "" {
			out = append(out, b.Dst)
		}
	})
	return out
}

// socketPath is the path of one /proc/net/unix line ("Num RefCount
// Protocol Flags Type St Inode Path"), or "" for an unnamed, abstract or
// relative one.
func socketPath(line []byte) string {
	f := 0
	for i := 0; i < len(line); {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if i >= len(line) {
			return ""
		}
		if f == 7 {
			p := string(bytes.TrimRight(line[i:], " \r"))
			if !filepath.IsAbs(p) {
				return ""
			}
			return filepath.Clean(p)
		}
		for i < len(line) && line[i] != ' ' {
			i++
		}
		f++
	}
	return ""
}

// hostVisible reports whether the jail shows host path p: the last mount
// that covers it (the deepest; of equals, the later) is a bind of the host,
// not a tmpfs, a mask or a file made from data.
func (s *Spec) hostVisible(p string) bool {
	best, visible := "/", true
	consider := func(dst string, v bool) {
		if paths.Within(p, dst) && len(dst) >= len(best) {
			best, visible = dst, v
		}
	}
	consider("/dev", false)
	consider("/proc", false)
	for _, d := range s.Private {
		consider(d, false)
	}
	if s.Home != "" {
		consider(s.Home, false)
	}
	// A bind shows the host path p only when it binds that same path (the
	// caches' tree is bound at ~/.cache, not at its own path).
	s.eachBind(func(b *Bind, _ bool) { consider(b.Dst, b.Src == b.Dst && !b.skip) })
	for _, m := range s.Masks {
		consider(m.Path, false)
	}
	for _, d := range s.Scratch {
		consider(d, false)
	}
	return visible
}

// DropVanishedSockets drops the masks of host sockets that are no longer
// there (an unbound socket is not connectable), and of other users' homes
// removed meanwhile, and reports whether it dropped any: bwrap would fail
// to make a mount point for either on the read-only root.
func (s *Spec) DropVanishedSockets() bool {
	kept := s.Masks[:0]
	dropped := false
	for _, m := range s.Masks {
		if m.Socket {
			if fi, err := os.Lstat(m.Path); err != nil || fi.Mode()&fs.ModeSocket == 0 {
				dropped = true
				continue
			}
		}
		if m.OtherHome {
			if fi, err := os.Lstat(m.Path); err != nil || !fi.IsDir() {
				dropped = true
				continue
			}
		}
		kept = append(kept, m)
	}
	s.Masks = kept
	return dropped
}
