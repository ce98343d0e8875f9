package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/sandbox/hostview"
	"github.com/cco-dev/cco/sandbox/saferead"
)

// What of the host the jail does not show beyond the home: the host's
// network interfaces and cgroup tree in /sys (package hostview), other
// users' homes, and what sandbox.toml's hide key names.

// Host files the view reads; tests point them elsewhere.
var (
	procCgroup = "/proc/self/cgroup"
	etcPasswd  = "/etc/passwd"
)

// sysHost is the host as hostview.Sys asks of it; tests give it another.
var sysHost = func() hostview.Host {
	cg, _ := saferead.ReadCapped(procCgroup)
	return hostview.Host{
		Exists: func(p string) bool { _, err := os.Lstat(p); return err == nil },
		FSType: func(p string) int64 {
			var st unix.Statfs_t
			if unix.Statfs(p, &st) != nil {
				return 0
			}
			return st.Type
		},
		Cgroup: string(cg),
	}
}

// sysView masks /sys's view of the host's wiring and shows the jail's own
// cgroup where runtimes look for their limits.
func (pl *planner) sysView() {
	v := hostview.Sys(sysHost())
	for _, m := range v.Masks {
		pl.s.Masks = append(pl.s.Masks, Mask{Path: m, Kind: MaskDir})
	}
	for _, b := range v.Binds {
		// The kernel's own tree, which no user controls: bound by path.
		pl.s.SysBinds = append(pl.s.SysBinds, Bind{Src: b[0], Dst: b[1], System: true})
	}
}

// hidden masks the paths hide names and other users' homes. A tree that
// holds the workspace or another bind cannot be masked after it: other
// users' homes that share a parent (/home) are hidden by making the parent
// private before anything is bound, one mount instead of one a user, and a
// hide entry that holds a bind refuses the launch.
func (pl *planner) hidden(hide []string) error {
	binds := pl.s.bindTargets()
	holds := func(p string) string {
		for _, b := range binds {
			if paths.Within(b, p) {
				return b
			}
		}
		return ""
	}
	for _, h := range hide {
		p := h
		if rel, ok := cutHome(h); ok {
			p = filepath.Join(pl.home, rel)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if b := holds(p); b != "" {
			return fmt.Errorf("hide entry %q holds %s, which the jail binds (fix: remove it from hide in %s, or launch elsewhere)", h, b, ConfigPath)
		}
		kind := MaskFile
		if fi.IsDir() {
			kind = MaskDir
		}
		pl.s.Masks = append(pl.s.Masks, Mask{Path: p, Kind: kind})
	}
	passwd, _ := saferead.ReadCapped(etcPasswd)
	homes := hostview.OtherHomes(string(passwd), pl.home)
	parents := map[string]int{}
	for _, h := range homes {
		parents[filepath.Dir(h)]++
	}
	for _, h := range homes {
		if parent := filepath.Dir(h); parents[parent] > 1 && privateParent(parent) {
			if !slices.Contains(pl.s.Private, parent) {
				pl.s.Private = append(pl.s.Private, parent)
			}
			continue
		}
		if fi, err := os.Lstat(h); err != nil || !fi.IsDir() || holds(h) != "" || under(h, pl.s.Private) {
			continue
		}
		pl.s.Masks = append(pl.s.Masks, Mask{Path: h, Kind: MaskDir, OtherHome: true})
	}
	return nil
}

// privateParent reports whether a directory that holds several homes may
// be made private wholesale: not /, and no system tree.
func privateParent(d string) bool {
	if d == "/" {
		return false
	}
	for _, t := range protectedSystem {
		if paths.Within(t, d) || paths.Within(d, t) {
			return false
		}
	}
	return true
}

// bindTargets are the jail paths of every bind planned so far, the home's
// tmpfs among them.
func (s *Spec) bindTargets() []string {
	var out []string
	if s.Home != "" {
		out = append(out, s.Home)
	}
	s.eachBind(func(b *Bind, _ bool) { out = append(out, b.Dst) })
	return out
}

// cutHome is p without a leading "~/", and whether it had one.
func cutHome(p string) (string, bool) {
	if len(p) > 2 && p[:2] == "~/" {
		return filepath.Clean(p[2:]), true
	}
	return "", false
}
