// Package hostview decides what of the host's own wiring the jail may not
// see: the host's network interfaces and cgroup tree in /sys, other users'
// homes, the paths sandbox.toml's hide key names, and the host's sockets.
// Its functions take what they read (the mount table, /proc/self/cgroup,
// /etc/passwd, the socket list) as text, so that tests give them any host.
package hostview

import (
	"bufio"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

// Sys is the jail's /sys for a host with mount table mountinfo
// (/proc/self/mountinfo) and a launcher in the cgroups of procCgroup
// (/proc/self/cgroup). exists reports whether a host path exists.
//
// The host's cgroup tree is hidden; the jail's own cgroup is shown where
// the runtimes that size their heaps and thread pools by its limits look
// (with the jail's own cgroup namespace, /proc/self/cgroup names the root
// of each hierarchy): on cgroup v2 it is bound over /sys/fs/cgroup; on v1
// the memory and cpu hierarchies' own directories are bound over theirs in
// an otherwise empty /sys/fs/cgroup. A launcher in a hierarchy's root has
// no limits there to show. CPU counts need nothing: nproc asks the
// scheduler, and /sys/devices/system/cpu stays.
func Sys(mountinfo, procCgroup string, exists func(string) bool) SysView {
	var v SysView
	for _, d := range netDirs {
		if exists(d) {
			v.Masks = append(v.Masks, d)
		}
	}
	own := ownCgroups(procCgroup)
	mounts := cgroupMounts(mountinfo)
	if m, ok := mounts[cgroupRoot]; ok && m.fstype == "cgroup2" {
		if p := own[""]; p != "" && p != "/" {
			v.Binds = append(v.Binds, [2]string{filepath.Join(cgroupRoot, p), cgroupRoot})
		} else {
			v.Masks = append(v.Masks, cgroupRoot)
		}
		return v
	}
	if !exists(cgroupRoot) {
		return v
	}
	v.Masks = append(v.Masks, cgroupRoot)
	for _, ctrl := range []string{"memory", "cpu"} {
		for _, dst := range slices.Sorted(mapKeys(mounts)) {
			m := mounts[dst]
			if m.fstype != "cgroup" || !slices.Contains(m.options, ctrl) {
				continue
			}
			if p := own[strings.Join(m.options, ",")]; p != "" && p != "/" {
				v.Binds = append(v.Binds, [2]string{filepath.Join(dst, p), dst})
			}
		}
	}
	return v
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

type cgroupMount struct {
	fstype  string
	options []string // the v1 controllers
}

// cgroupMounts are the cgroup mounts at or below /sys/fs/cgroup, by mount
// point.
func cgroupMounts(mountinfo string) map[string]cgroupMount {
	out := map[string]cgroupMount{}
	sc := bufio.NewScanner(strings.NewReader(mountinfo))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		dst := unescape(f[4])
		if dst != cgroupRoot && !strings.HasPrefix(dst, cgroupRoot+"/") {
			continue
		}
		if g[0] != "cgroup" && g[0] != "cgroup2" {
			continue
		}
		var ctrls []string
		for _, o := range strings.Split(g[2], ",") {
			switch o {
			case "rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec", "nsdelegate", "memory_recursiveprot":
			default:
				ctrls = append(ctrls, o)
			}
		}
		out[dst] = cgroupMount{fstype: g[0], options: ctrls}
	}
	return out
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

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
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
		if !filepath.IsAbs(h) || h == "/" || h == selfHome || within(selfHome, h) || slices.Contains(out, h) {
			continue
		}
		out = append(out, h)
	}
	return out
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}
