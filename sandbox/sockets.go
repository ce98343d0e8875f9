package sandbox

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
)

// A read-only mount does not stop connect(2) on a unix socket: the write
// check skips sockets. So every host socket the jail could see is masked
// (/dev/null over it: connect then fails with EINVAL). The host network
// namespace's /proc/net/unix lists the bound pathname sockets, cheaply; the
// launcher runs there, so its view is the host's.

// procNetUnix is read for the list; tests point it elsewhere.
var procNetUnix = "/proc/net/unix"

// socketMasks are the masks for the listed host sockets the jail would
// otherwise see.
func socketMasks(s *Spec) []Mask {
	b, err := os.ReadFile(procNetUnix)
	if err != nil {
		return nil
	}
	var out []Mask
	seen := map[string]bool{}
	for _, line := range bytes.Split(b, []byte("\n"))[1:] {
		p := socketPath(line)
		if p == "" || seen[p] || !s.hostVisible(p) {
			continue
		}
		seen[p] = true
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSocket != 0 {
			out = append(out, Mask{Path: p, Kind: MaskFile, Socket: true})
		}
	}
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
		if within(p, dst) && len(dst) >= len(best) {
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
// there (an unbound socket is not connectable), and reports whether it
// dropped any.
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
		kept = append(kept, m)
	}
	s.Masks = kept
	return dropped
}
