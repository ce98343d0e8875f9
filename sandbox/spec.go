// Package sandbox builds the bubblewrap jail an agent runs in: a Spec (plain
// data, decided once per launch from the profile, the home, the workspace and
// sandbox.toml), a pure function from Spec to bwrap's argv, the seccomp
// program, the jail marker, and the host-side bookkeeping (mount-point
// placeholders, the carried-over and watched state files).
package sandbox

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/sandbox/sshagent"
)

// Bind is one bind mount: Src on the host at Dst inside the jail. A
// read-only Bind without Src needs nothing on the host: with EmptyDir it is
// an empty read-only directory (a tmpfs), otherwise a file holding Data,
// which bwrap copies from a descriptor into memory of its own and binds
// read-only (--ro-bind-data; see Spec.DataFD).
type Bind struct {
	Src, Dst string
	// Try skips a missing source (bwrap's --bind-try).
	Try bool
	// Data is the content of a Bind without Src.
	Data []byte
	// EmptyDir makes a Bind without Src an empty read-only directory.
	EmptyDir bool
	// System marks a Src that only root controls (the vendor binary behind
	// its versioned links): bwrap gets its path. Every other Src is opened
	// by the launcher without following any link (OpenBindSources) and
	// handed to bwrap as a descriptor (--bind-fd), so no link a user or a
	// session planted can redirect it, then or between plan and mount.
	System bool
	// skip marks a Try bind whose source was missing when it was opened.
	skip bool
}

// isData reports whether b is a file made from Data.
func (b *Bind) isData() bool { return b.Src == "" && !b.EmptyDir }

// Link is a symbolic link at Path, in the jail only, pointing to Target.
type Link struct{ Target, Path string }

// MaskKind says how a path is hidden.
type MaskKind int

const (
	// MaskDir covers a directory with an empty read-only tmpfs.
	MaskDir MaskKind = iota
	// MaskTmpfs covers a directory with an empty writable tmpfs whose
	// writes never reach the host.
	MaskTmpfs
	// MaskFile binds /dev/null over a file: under nodev it cannot be
	// opened at all.
	MaskFile
)

// Mask hides one path.
type Mask struct {
	Path string
	Kind MaskKind
	// Socket marks the mask of a host socket: one that goes away before
	// the jail is built is dropped (DropVanishedSockets), since bwrap
	// would otherwise make a file at its path, or fail to.
	Socket bool
	// OtherHome marks the mask of another user's home, dropped the same
	// way when the home goes away (a userdel -r while the jail is built).
	OtherHome bool
}

// Spec is everything that decides the bwrap argv. It is plain data:
// building it may look at the filesystem, turning it into argv may not.
type Spec struct {
	// Env is the whole environment inside the jail, KEY=VALUE, in order.
	Env []string
	// UnshareNet cuts the network (the egress jail); false shares the host's.
	UnshareNet bool
	// RootView maps bwrap's own uid and gid to 0 inside: bwrap runs as
	// the unprivileged rootview.ID for root's jail (sandbox/rootview).
	RootView bool
	// SeccompFD and StatusFD are the child's descriptors for bwrap's
	// --seccomp and --json-status-fd; 0 leaves them out.
	SeccompFD, StatusFD int
	// DataFD is the descriptor of the first file made from data (the
	// read-only Binds without Src, then the marker); the others follow
	// it, in the order DataFiles lists their contents.
	DataFD int
	// BindFD is the descriptor of the first bind source opened by the
	// launcher; the others follow it, in the order OpenBindSources opens
	// them.
	BindFD int
	// TmpfsSize is the size in bytes of each writable tmpfs, by path
	// (bwrap's --size); a path not listed gets the kernel's default.
	TmpfsSize map[string]int64
	// MaxProcs is the jail's RLIMIT_NPROC, which the launcher sets on bwrap
	// (WithProcLimit); 0 leaves the limit as it is.
	MaxProcs int
	// Private are the directories given an empty tmpfs before anything is
	// bound (/tmp, /run, ...), in order.
	Private []string
	// Home is covered by a mode-0700 tmpfs.
	Home string
	// HomeBinds come right after the home tmpfs: the profile's login state,
	// read-write.
	HomeBinds []Bind
	// HomeReadOnly are read-only binds inside the home (command-bearing
	// settings files, the curated gitconfig, the vendor binary's
	// conventional path).
	HomeReadOnly []Bind
	// Writable are extra read-write binds (allow_write, forge token dirs).
	Writable []Bind
	// Workspace is bound read-write, or read-only with WorkspaceReadOnly.
	Workspace string
	// WorkspaceReadOnly binds the workspace read-only (a read-only mount,
	// or the agent's read-only mode): nothing is protected in it, since
	// nothing there can change.
	WorkspaceReadOnly bool
	// workspace is Workspace as a Bind, for eachBind.
	workspace Bind
	// Trees are read-write binds of directories onto themselves after the
	// workspace (its .git, .claude, .codex, and a worktree's admin and
	// common directories): a mount point cannot be renamed or removed, so
	// the read-only binds inside them stay where git and the agents look.
	Trees []Bind
	// ReadOnly are re-binds after the workspace: its command-bearing files
	// and any protected system tree the workspace contains.
	ReadOnly []Bind
	// Masks come after every bind they could cover.
	Masks []Mask
	// SysBinds are read-only binds of the kernel's own trees, after the
	// masks they lie in (the jail's own cgroup in an empty
	// /sys/fs/cgroup).
	SysBinds []Bind
	// Scratch are writable tmpfs directories in the home (caches), made
	// before the home's own tmpfs is remounted read-only.
	Scratch []string
	// HomeDirs are directories made in the jail's home (in a scratch
	// tmpfs), and Links symbolic links there (the caches' default places):
	// both after the home's binds and before it turns read-only.
	HomeDirs []string
	Links    []Link
	// NoWorkspace, when set, is the empty private directory a launch with
	// no workspace starts in (made after the private /tmp).
	NoWorkspace string
	// EgressSocket is the host path of the egress proxy's socket, bound
	// read-only at the fixed EgressSocket inside: after the /tmp and /run
	// tmpfs that would cover it. "" when no proxy runs.
	EgressSocket string
	// SSHAgentSocket is the user's ssh-agent socket, bound at
	// sshagent.SocketPath (ssh_agent).
	SSHAgentSocket string
	// HostPorts are the host loopback ports whose listeners the endpoint's
	// maker makes beside it in the jail (Launch.HostPorts).
	HostPorts []int
	// Marker is the jail marker's content, bound read-only at MarkerPath,
	// last (from a descriptor: nothing of it is on the host).
	Marker []byte
	// EtcProfile, when set, is the jail's /etc/profile (loginProfile),
	// bound read-only after the marker.
	EtcProfile []byte
	// Chdir is the working directory inside.
	Chdir string
	// Command is what bwrap runs.
	Command []string
	// Init, when set, is the jail's pid 1, which runs Command (package
	// jailinit): bwrap starts it with --as-pid-1, so that bwrap itself
	// is no process of the jail's (docs/adr/0110-jail-pid-1.md).
	Init []string
	// Terminal: the agent runs on a pty of the jail's that the in-jail
	// helper hands out to the launcher (--tty-fd), which holds the user's
	// terminal (package pty).
	Terminal bool
	// endpoint says who makes the agent's proxy endpoint in the jail's
	// network namespace (Launch.HostEndpoint).
	endpoint endpointMaker
}

// endpointMaker is who makes the proxy endpoint in the jail.
type endpointMaker int

const (
	endpointNone     endpointMaker = iota // no proxy, or the helper's bridge
	endpointLauncher                      // the launcher, while bwrap holds the agent
	endpointHelper                        // the helper, which hands it back
)

// Argv turns a Spec into bwrap's arguments (without the bwrap path). It is a
// pure function: the order is the jail's meaning, because a later mount
// covers an earlier one. Its descriptors are numbered from the Spec's
// SeccompFD, StatusFD, DataFD and BindFD; a launch instead donates each
// file as its flag is written (donation), so that no number is decided
// apart from its flag.
func Argv(s *Spec) []string { return s.argv(&numbered{s: s, data: s.DataFD, bind: s.BindFD}) }

// numbered is Argv's donor: the numbers the Spec states, no files.
type numbered struct {
	s          *Spec
	data, bind int
}

func (n *numbered) seccomp() int { return n.s.SeccompFD }
func (n *numbered) status() int  { return n.s.StatusFD }
func (n *numbered) block() int   { return 0 }
func (n *numbered) handback() int {
	return 0
}
func (n *numbered) tty() int            { return 0 }
func (n *numbered) dataFile([]byte) int { n.data++; return n.data - 1 }
func (n *numbered) source(b *Bind) (int, bool) {
	if b.skip {
		return 0, false
	}
	n.bind++
	return n.bind - 1, true
}

// donor gives each descriptor bwrap inherits its number as argv names it;
// 0 from seccomp, status, block or handback leaves that flag out.
type donor interface {
	seccomp() int
	status() int
	// block is bwrap's --block-fd: the agent waits on it until the
	// launcher's endpoint in the jail's network namespace is up.
	block() int
	// handback is the descriptor on which the in-jail helper hands the
	// endpoint it made back to the launcher.
	handback() int
	// tty is the in-jail helper's end of the agent's terminal's control
	// socket (package pty).
	tty() int
	dataFile(data []byte) int
	// source is a bind's source; false drops the bind (a missing Try).
	source(b *Bind) (int, bool)
}

func (s *Spec) argv(d donor) []string { return append(s.options(d), s.command(d)...) }

// options are bwrap's options, up to the "--" before what it runs.
func (s *Spec) options(d donor) []string {
	a := make([]string, 0, 64+3*len(s.Env)+4*(len(s.HomeBinds)+len(s.HomeReadOnly)+len(s.Writable)+len(s.ReadOnly)+len(s.Masks))+len(s.Command))
	// --new-session: nothing in the jail shares the user's terminal
	// session, so no process there can open it as /dev/tty.
	a = append(a,
		"--die-with-parent", "--new-session",
		"--unshare-user", "--disable-userns",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
	if s.RootView {
		a = append(a, "--uid", "0", "--gid", "0")
	}
	if s.UnshareNet {
		a = append(a, "--unshare-net")
	}
	a = append(a, "--cap-drop", "ALL")
	if len(s.Init) > 0 {
		a = append(a, "--as-pid-1")
	}
	if fd := d.seccomp(); fd > 0 {
		a = append(a, "--seccomp", strconv.Itoa(fd))
	}
	if fd := d.status(); fd > 0 {
		a = append(a, "--json-status-fd", strconv.Itoa(fd))
	}
	if fd := d.block(); fd > 0 {
		a = append(a, "--block-fd", strconv.Itoa(fd))
	}
	a = append(a, "--clearenv")
	for _, kv := range s.Env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				a = append(a, "--setenv", kv[:i], kv[i+1:])
				break
			}
		}
	}
	// bwrap rereads the whole mount table for every bind, so the binds come
	// while the table is shortest: /dev, /proc and the private tmpfs
	// follow them, but for a private tree that holds a later mount (a home
	// below /tmp), which must be there first.
	a = append(a, "--ro-bind", "/", "/")
	early, late := s.splitPrivate()
	for _, p := range early {
		a = tmpfs(a, s, p)
	}
	if s.Home != "" {
		a = append(a, "--perms", "0700")
		a = tmpfs(a, s, s.Home)
	}
	s.eachBind(func(b *Bind, rw bool) {
		switch {
		case b.EmptyDir && b.Src == "":
			a = append(a, "--tmpfs", b.Dst, "--remount-ro", b.Dst)
		case b.isData():
			a = append(a, "--perms", "0444", "--ro-bind-data", strconv.Itoa(d.dataFile(b.Data)), b.Dst)
		case b.System:
			a = append(a, pick(rw, "--bind", "--ro-bind"), b.Src, b.Dst)
		default:
			if fd, ok := d.source(b); ok {
				a = append(a, pick(rw, "--bind-fd", "--ro-bind-fd"), strconv.Itoa(fd), b.Dst)
			}
		}
	})
	var later []string
	for _, m := range s.Masks {
		switch m.Kind {
		case MaskFile:
			a = append(a, "--ro-bind", "/dev/null", m.Path)
		case MaskDir:
			// A mask that holds a system bind turns read-only once the
			// bind's mount point is made in it; until then it holds no
			// more than mount points.
			if slices.ContainsFunc(s.SysBinds, func(b Bind) bool { return paths.Within(b.Dst, m.Path) }) {
				a = append(a, "--size", "65536", "--tmpfs", m.Path)
				later = append(later, m.Path)
			} else {
				a = append(a, "--tmpfs", m.Path, "--remount-ro", m.Path)
			}
		default:
			a = tmpfs(a, s, m.Path)
		}
	}
	for _, b := range s.SysBinds {
		a = append(a, "--ro-bind", b.Src, b.Dst)
	}
	for _, p := range later {
		a = append(a, "--remount-ro", p)
	}
	for _, d := range s.Scratch {
		a = tmpfs(a, s, d)
	}
	for _, d := range s.HomeDirs {
		a = append(a, "--dir", d)
	}
	for _, l := range s.Links {
		a = append(a, "--symlink", l.Target, l.Path)
	}
	if s.Home != "" {
		// Last of the home: every mount point in it exists by now, and
		// nothing but the bound state and the scratch dirs is writable.
		a = append(a, "--remount-ro", s.Home)
	}
	a = append(a, "--dev", "/dev", "--proc", "/proc")
	for _, p := range late {
		a = tmpfs(a, s, p)
	}
	// bwrap's /dev is a writable tmpfs of half the RAM: read-only once
	// /dev/shm (a sized tmpfs of its own) is in place. Devices stay
	// usable; nothing new can be made there.
	a = append(a, "--remount-ro", "/dev")
	if s.NoWorkspace != "" {
		a = append(a, "--dir", s.NoWorkspace)
	}
	if s.EgressSocket != "" {
		a = append(a, "--ro-bind", s.EgressSocket, EgressSocket)
	}
	if s.SSHAgentSocket != "" {
		// Checked by the launcher (sshagent.CheckSocket): a socket of the
		// user's, no link. Root's view maps its directory (rootview.Trees).
		a = append(a, "--ro-bind", s.SSHAgentSocket, sshagent.SocketPath)
	}
	if s.Marker != nil {
		a = append(a, "--perms", "0444", "--ro-bind-data", strconv.Itoa(d.dataFile(s.Marker)), MarkerPath)
	}
	if s.EtcProfile != nil {
		a = append(a, "--perms", "0444", "--ro-bind-data", strconv.Itoa(d.dataFile(s.EtcProfile)), "/etc/profile")
	}
	if s.Chdir != "" {
		a = append(a, "--chdir", s.Chdir)
	}
	return a
}

// command is "--" and what bwrap runs: the init, the helper's mode and its
// descriptors, the command.
func (s *Spec) command(d donor) []string {
	a := append([]string{"--"}, s.Init...)
	var helper []string
	if fd := d.handback(); fd > 0 {
		helper = append(helper, "--endpoint-fd", strconv.Itoa(fd))
		if len(s.HostPorts) > 0 {
			ports := make([]string, len(s.HostPorts))
			for i, n := range s.HostPorts {
				ports[i] = strconv.Itoa(n)
			}
			helper = append(helper, "--host-ports", strings.Join(ports, ","))
		}
	}
	if s.Terminal {
		if fd := d.tty(); fd > 0 {
			helper = append(helper, "--tty-fd", strconv.Itoa(fd))
		}
	}
	if len(helper) > 0 && len(s.Command) >= 2 {
		// The helper's mode, then its descriptors.
		a = append(a, s.Command[:2]...)
		a = append(a, helper...)
		return append(a, s.Command[2:]...)
	}
	return append(a, s.Command...)
}

// splitPrivate orders the private tmpfs: early are those that hold the
// home, a bind, a mask or a scratch directory (each must be mounted before
// what lies in it); late are the rest, and any below /dev or /proc, which
// follow bwrap's own /dev and /proc.
func (s *Spec) splitPrivate() (early, late []string) {
	var targets []string
	if s.Home != "" {
		targets = append(targets, s.Home)
	}
	s.eachBind(func(b *Bind, _ bool) { targets = append(targets, b.Dst) })
	for _, m := range s.Masks {
		targets = append(targets, m.Path)
	}
	targets = append(targets, s.Scratch...)
	for _, p := range s.Private {
		holds := false
		for _, t := range targets {
			if paths.Within(t, p) {
				holds = true
				break
			}
		}
		if holds && !paths.Within(p, "/dev") && !paths.Within(p, "/proc") {
			early = append(early, p)
		} else {
			late = append(late, p)
		}
	}
	return early, late
}

// tmpfs emits a writable tmpfs at p, sized when the Spec gives its size.
func tmpfs(a []string, s *Spec, p string) []string {
	if n, ok := s.TmpfsSize[p]; ok && n > 0 {
		a = append(a, "--size", strconv.FormatInt(n, 10))
	}
	return append(a, "--tmpfs", p)
}

func pick(rw bool, yes, no string) string {
	if rw {
		return yes
	}
	return no
}

// eachBind calls f for every bind in the order Argv emits them, rw telling
// a read-write bind from a read-only one. Argv, DataFiles and
// OpenBindSources walk this one order, so a descriptor's number cannot drift
// from its flag.
func (s *Spec) eachBind(f func(b *Bind, rw bool)) {
	each := func(bs []Bind, rw bool) {
		for i := range bs {
			f(&bs[i], rw)
		}
	}
	each(s.HomeBinds, true)
	each(s.HomeReadOnly, false)
	each(s.Writable, true)
	if s.Workspace != "" {
		s.workspace.Src, s.workspace.Dst = s.Workspace, s.Workspace
		f(&s.workspace, !s.WorkspaceReadOnly)
	}
	each(s.Trees, true)
	each(s.ReadOnly, false)
}

// DataFiles are the contents of the files made from data, in the order of
// their descriptors from DataFD on: the launcher hands each to bwrap on its
// descriptor.
func DataFiles(s *Spec) [][]byte {
	var out [][]byte
	s.eachBind(func(b *Bind, _ bool) {
		if b.isData() {
			out = append(out, b.Data)
		}
	})
	if s.Marker != nil {
		out = append(out, s.Marker)
	}
	if s.EtcProfile != nil {
		out = append(out, s.EtcProfile)
	}
	return out
}

// layer is one mount of the jail as the mount points below it see it: a
// bind from the host tree src, or a tmpfs (src "").
type layer struct{ dst, src string }

// layers are the jail's mounts that hold other mount points, the host's
// root first.
func (s *Spec) layers() []layer {
	out := []layer{{"/", "/"}}
	for _, p := range s.Private {
		out = append(out, layer{dst: p})
	}
	if s.Home != "" {
		out = append(out, layer{dst: s.Home})
	}
	s.eachBind(func(b *Bind, _ bool) {
		switch {
		case b.Src == "" && b.EmptyDir:
			out = append(out, layer{dst: b.Dst})
		case b.Src != "" && !b.System:
			out = append(out, layer{dst: b.Dst, src: b.Src})
		}
	})
	for _, m := range s.Masks {
		if m.Kind != MaskFile {
			out = append(out, layer{dst: m.Path})
		}
	}
	for _, d := range s.Scratch {
		out = append(out, layer{dst: d})
	}
	return out
}

// layerIndex finds, for a jail path, the deepest of the layers that holds
// it, by its ancestors (a map per destination): a Spec with hundreds of
// binds (100 nested repositories) asks for each of them, and a scan of
// every layer per path cost tens of milliseconds a launch.
type layerIndex struct {
	ls  []layer
	dst map[string]int // the last layer at each destination
}

func (s *Spec) layerIndex() *layerIndex {
	ix := &layerIndex{ls: s.layers(), dst: map[string]int{}}
	for i, l := range ix.ls {
		ix.dst[l.dst] = i
	}
	return ix
}

// hostPath is where on the host bwrap resolves the jail path p, through
// the deepest mount that holds it (one planned before p's own), or "" when
// that mount is a tmpfs of the jail's: nothing of the host is on the way.
func (ix *layerIndex) hostPath(p string) string {
	best := -1
	for q := p; q != "/" && best < 0; {
		i := strings.LastIndexByte(q, '/')
		if i < 0 {
			return ""
		}
		if q = q[:i]; q == "" {
			q = "/"
		}
		if j, ok := ix.dst[q]; ok {
			best = j
		}
	}
	if best < 0 || ix.ls[best].src == "" {
		return ""
	}
	l := ix.ls[best]
	if l.dst == "/" {
		return p
	}
	return l.src + p[len(l.dst):]
}

// HostMountPoints are the host paths of every name bwrap resolves on the
// host to mount onto (the binds' destinations, the masks), in order,
// each once.
func (s *Spec) HostMountPoints() []string {
	ix := s.layerIndex()
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if h := ix.hostPath(p); h != "" && !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	s.eachBind(func(b *Bind, _ bool) { add(b.Dst) })
	for _, m := range s.Masks {
		add(m.Path)
	}
	return out
}

// SealedMountPoints are the host paths of the mount points below which the
// jail cannot change the host: a read-only directory, an empty directory,
// a tmpfs mask.
func (s *Spec) SealedMountPoints() []string {
	ix := s.layerIndex()
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if h := ix.hostPath(p); h != "" && !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	s.eachBind(func(b *Bind, rw bool) {
		if rw || b.isData() {
			return
		}
		if b.EmptyDir {
			add(b.Dst)
		} else if fi, err := os.Lstat(b.Src); err == nil && fi.IsDir() {
			add(b.Dst)
		}
	})
	for _, m := range s.Masks {
		if m.Kind != MaskFile {
			add(m.Path)
		}
	}
	return out
}

// WritableTrees are the host trees the jail binds read-write.
func (s *Spec) WritableTrees() []string {
	var out []string
	s.eachBind(func(b *Bind, rw bool) {
		if rw && b.Src != "" && !b.System && !slices.Contains(out, b.Src) {
			out = append(out, b.Src)
		}
	})
	return out
}

// MountPoint is a name the jail mounts onto in a host tree its session
// can write: Dst in the jail, and on the host Rel below Top, the outermost
// such tree that holds it. An engine that mounts through descriptors opens
// Top once (package beneath) and resolves Rel beneath it, never by path;
// the placeholders are made the same way.
type MountPoint struct {
	Dst, Top, Rel string
}

// MountPointsBeneath are the Spec's mount points in host trees the jail
// writes, in Argv's order, each once.
func (s *Spec) MountPointsBeneath() []MountPoint {
	ix := s.layerIndex()
	rw := s.WritableTrees()
	var out []MountPoint
	seen := map[string]bool{}
	add := func(dst string) {
		h := ix.hostPath(dst)
		if h == "" || seen[dst] {
			return
		}
		top := ""
		for _, t := range rw {
			if t != h && paths.Within(h, t) && (top == "" || len(t) < len(top)) {
				top = t
			}
		}
		if top == "" {
			return
		}
		seen[dst] = true
		rel := h[len(top):]
		if top != "/" {
			rel = rel[1:]
		}
		out = append(out, MountPoint{Dst: dst, Top: top, Rel: rel})
	}
	s.eachBind(func(b *Bind, _ bool) { add(b.Dst) })
	for _, m := range s.Masks {
		add(m.Path)
	}
	return out
}
