// Package hostview decides what of the host's own wiring the jail may not
// see: the host's network interfaces and cgroup tree in /sys, other users'
// homes, the paths sandbox.toml's hide key names, and the host's sockets.
// Its functions take what they read (the mount table, /proc/self/cgroup,
// /etc/passwd, the socket list) as text, so that tests give them any host.
package hostview

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cco-dev/cco/internal/paths"
)

// SysView is what the jail does to /sys: empty read-only directories over
// Masks, then each Binds[i][0] bound read-only at Binds[i][1].
type SysView struct {
	Masks []string
	Binds [][2]string
}

// netDirs list the host's network interfaces: the jail has only lo, in a
// network namespace of its own, and the host's are no business of it.
var netDirs = []string{"/sys/class/net", "/sys/devices/virtual/net"}

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// Host is what Sys asks of the host: whether a path exists, its
// filesystem's magic number (statfs), and the launcher's cgroups
// (/proc/self/cgroup's text).
type Host struct {
	Exists func(string) bool
	FSType func(string) int64
	Cgroup string
}

// Filesystem magic numbers (linux/magic.h).
const (
	cgroup2Magic = 0x63677270
	cgroupMagic  = 0x27e0eb
)

// Sys is the jail's /sys on host h.
//
// The host's cgroup tree is hidden; the jail's own cgroup is shown where
// the runtimes that size their heaps and thread pools by its limits look
// (with the jail's own cgroup namespace, /proc/self/cgroup names the root
// of each hierarchy): on cgroup v2 it is bound over /sys/fs/cgroup; on v1
// the memory and cpu hierarchies' own directories are bound over theirs in
// an otherwise empty /sys/fs/cgroup. A launcher in a hierarchy's root has
// no limits there to show. CPU counts need nothing: nproc asks the
// scheduler, and /sys/devices/system/cpu stays. statfs tells the
// hierarchies apart: the mount table would cost a read of every mount.
func Sys(h Host) SysView {
	var v SysView
	for _, d := range netDirs {
		if h.Exists(d) {
			v.Masks = append(v.Masks, d)
		}
	}
	own := ownCgroups(h.Cgroup)
	if h.FSType(cgroupRoot) == cgroup2Magic {
		if p := own[""]; p != "" && p != "/" {
			v.Binds = append(v.Binds, [2]string{filepath.Join(cgroupRoot, p), cgroupRoot})
		} else {
			v.Masks = append(v.Masks, cgroupRoot)
		}
		return v
	}
	if !h.Exists(cgroupRoot) {
		return v
	}
	v.Masks = append(v.Masks, cgroupRoot)
	for key, p := range own {
		if p == "" || p == "/" {
			continue
		}
		for _, ctrl := range strings.Split(key, ",") {
			if ctrl != "memory" && ctrl != "cpu" {
				continue
			}
			// The hierarchy is mounted at its controller list's name
			// (cpu,cpuacct), with a link per controller.
			dir := filepath.Join(cgroupRoot, key)
			if h.FSType(dir) == cgroupMagic {
				v.Binds = append(v.Binds, [2]string{filepath.Join(dir, p), dir})
			}
			break
		}
	}
	slices.SortFunc(v.Binds, func(a, b [2]string) int { return strings.Compare(a[1], b[1]) })
	return v
}

// ownCgroups maps each hierarchy's controllers ("" for v2, "cpu" or
// "cpu,cpuacct" or "name=systemd" for v1) to the launcher's cgroup path
// in it.
func ownCgroups(procCgroup string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(procCgroup, "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) == 3 {
			out[parts[1]] = parts[2]
		}
	}
	return out
}

// OtherHomes are the home directories of the other accounts in passwd
// (/etc/passwd's text) that a person logs in to (a login shell, a uid of
// 1000 or more), other than self's home: another user's project is not
// this user's to share with the agent.
func OtherHomes(passwd, selfHome string) []string {
	var out []string
	for _, l := range strings.Split(passwd, "\n") {
		f := strings.Split(l, ":")
		if len(f) < 7 || strings.HasPrefix(l, "#") {
			continue
		}
		uid, err := strconv.Atoi(f[2])
		if err != nil || uid < 1000 || uid == 65534 {
			continue
		}
		if sh := f[6]; strings.HasSuffix(sh, "/nologin") || strings.HasSuffix(sh, "/false") {
			continue
		}
		h := filepath.Clean(f[5])
		if !filepath.IsAbs(h) || h == "/" || h == selfHome || paths.Within(selfHome, h) || slices.Contains(out, h) {
			continue
		}
		out = append(out, h)
	}
	return out
}
