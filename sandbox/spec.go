// Package sandbox builds the bubblewrap jail an agent runs in: a Spec (plain
// data, decided once per launch from the profile, the home, the workspace and
// sandbox.toml), a pure function from Spec to bwrap's argv, the seccomp
// program, the jail marker, and the host-side bookkeeping (mount-point
// placeholders, the carried-over and watched state files).
package sandbox

import "strconv"

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
}

// isData reports whether b is a file made from Data.
func (b *Bind) isData() bool { return b.Src == "" && !b.EmptyDir }

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
	// Workspace is bound read-write.
	Workspace string
	// ReadOnly are re-binds after the workspace: its command-bearing files
	// and any protected system tree the workspace contains.
	ReadOnly []Bind
	// Masks come after every bind they could cover.
	Masks []Mask
	// Scratch are writable tmpfs directories in the home (caches), made
	// before the home's own tmpfs is remounted read-only.
	Scratch []string
	// EgressSocket is the host path of the egress proxy's socket, bound
	// read-only at the fixed EgressSocket inside: after the /tmp and /run
	// tmpfs that would cover it. "" when no proxy runs.
	EgressSocket string
	// Marker is the jail marker's content, bound read-only at MarkerPath,
	// last (from a descriptor: nothing of it is on the host).
	Marker []byte
	// Chdir is the working directory inside.
	Chdir string
	// Command is what bwrap runs.
	Command []string
}

// Argv turns a Spec into bwrap's arguments (without the bwrap path). It is a
// pure function: the order is the jail's meaning, because a later mount
// covers an earlier one.
func Argv(s *Spec) []string {
	a := make([]string, 0, 64+3*len(s.Env)+4*(len(s.HomeBinds)+len(s.HomeReadOnly)+len(s.Writable)+len(s.ReadOnly)+len(s.Masks))+len(s.Command))
	a = append(a,
		"--die-with-parent",
		"--unshare-user", "--disable-userns",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
	if s.RootView {
		a = append(a, "--uid", "0", "--gid", "0")
	}
	if s.UnshareNet {
		a = append(a, "--unshare-net")
	}
	a = append(a, "--cap-drop", "ALL")
	if s.SeccompFD > 0 {
		a = append(a, "--seccomp", strconv.Itoa(s.SeccompFD))
	}
	if s.StatusFD > 0 {
		a = append(a, "--json-status-fd", strconv.Itoa(s.StatusFD))
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
	a = append(a, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
	for _, p := range s.Private {
		a = append(a, "--tmpfs", p)
	}
	if s.Home != "" {
		a = append(a, "--perms", "0700", "--tmpfs", s.Home)
	}
	fd := s.DataFD
	a = binds(a, s.HomeBinds, "--bind", "--bind-try", &fd)
	a = binds(a, s.HomeReadOnly, "--ro-bind", "--ro-bind-try", &fd)
	a = binds(a, s.Writable, "--bind", "--bind-try", &fd)
	if s.Workspace != "" {
		a = append(a, "--bind", s.Workspace, s.Workspace)
	}
	a = binds(a, s.ReadOnly, "--ro-bind", "--ro-bind-try", &fd)
	for _, m := range s.Masks {
		switch m.Kind {
		case MaskFile:
			a = append(a, "--ro-bind", "/dev/null", m.Path)
		case MaskDir:
			a = append(a, "--tmpfs", m.Path, "--remount-ro", m.Path)
		default:
			a = append(a, "--tmpfs", m.Path)
		}
	}
	for _, d := range s.Scratch {
		a = append(a, "--tmpfs", d)
	}
	if s.Home != "" {
		// Last of the home: every mount point in it exists by now, and
		// nothing but the bound state and the scratch dirs is writable.
		a = append(a, "--remount-ro", s.Home)
	}
	if s.EgressSocket != "" {
		a = append(a, "--ro-bind", s.EgressSocket, EgressSocket)
	}
	if s.Marker != nil {
		a = append(a, "--perms", "0444", "--ro-bind-data", strconv.Itoa(fd), MarkerPath)
	}
	if s.Chdir != "" {
		a = append(a, "--chdir", s.Chdir)
	}
	a = append(a, "--")
	return append(a, s.Command...)
}

// binds emits bs; *fd is the descriptor of the next data file.
func binds(a []string, bs []Bind, op, try string, fd *int) []string {
	for i := range bs {
		b := &bs[i]
		switch {
		case b.EmptyDir && b.Src == "":
			a = append(a, "--tmpfs", b.Dst, "--remount-ro", b.Dst)
		case b.isData():
			a = append(a, "--perms", "0444", "--ro-bind-data", strconv.Itoa(*fd), b.Dst)
			*fd++
		case b.Try:
			a = append(a, try, b.Src, b.Dst)
		default:
			a = append(a, op, b.Src, b.Dst)
		}
	}
	return a
}

// DataFiles are the contents of the files made from data, in the order of
// their descriptors from DataFD on: the launcher hands each to bwrap on its
// descriptor.
func DataFiles(s *Spec) [][]byte {
	var out [][]byte
	for _, list := range [][]Bind{s.HomeBinds, s.HomeReadOnly, s.Writable, s.ReadOnly} {
		for i := range list {
			if list[i].isData() {
				out = append(out, list[i].Data)
			}
		}
	}
	if s.Marker != nil {
		out = append(out, s.Marker)
	}
	return out
}
