package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// MarkerPath is where, inside a jail, the shadow mounts the jail marker
// read-only. On the host /run is root's, so an unprivileged user cannot
// create it there; inside the jail it is a read-only bind mount that the
// jailed process (with no capabilities) cannot unmount, replace or write.
const MarkerPath = "/run/cco/jail"

// MarkerSchema is the marker's format version.
const MarkerSchema = 1

// Marker is what the shadow tells the processes inside a jail about it.
type Marker struct {
	Schema    int    `json:"schema"`
	Agent     string `json:"agent"`
	Session   string `json:"session"`
	Workspace string `json:"workspace"`
	// Egress is the network policy: "public", "allowlist", "off", or "host"
	// when the jail shares the host's network.
	Egress string `json:"egress"`
	// Engine is the jail engine that built the jail: "cco" (cco's own)
	// or "bwrap" (sandbox/engine).
	Engine string `json:"engine,omitempty"`
	// Layers are the protections in force besides the namespaces and
	// mounts: "seccomp", and "landlock" with its ABI where it applies.
	Layers []string `json:"layers,omitempty"`
}

// procRoot is the test seam for ProbeJail's view of /proc.
var procRoot = "/proc"

// ProbeJail decides, from inside, whether this process runs in a cco jail.
// All of these must hold, and none of them can be arranged by writing a file
// or setting an environment variable that the user or the agent controls:
//   - MarkerPath is a read-only mount point (per statx and statfs, or
//     /proc/self/mountinfo on an older kernel) and parses as a marker;
//   - the process has no effective capabilities (CapEff 0), so it is neither
//     root on the host nor able to remount the marker;
//   - NoNewPrivs is set, as bwrap sets it.
//
// It is the one place where the shadow (nested launches, the helper modes)
// and the guard agree on "inside". See docs/adr for what it does not stop.
func ProbeJail() (*Marker, error) {
	// Every host launch asks; without a marker the answer is no, before
	// the costlier reads (the mount table is long on a busy host).
	if _, err := os.Lstat(MarkerPath); err != nil {
		return nil, fmt.Errorf("%s is not a mount point (it does not exist): not inside a cco jail", MarkerPath)
	}
	status, err := os.ReadFile(procRoot + "/self/status")
	if err != nil {
		return nil, fmt.Errorf("reading %s/self/status: %w", procRoot, err)
	}
	if v := statusField(status, "CapEff"); strings.Trim(v, "0") != "" || v == "" {
		return nil, fmt.Errorf("the process has capabilities (CapEff %s): not inside a cco jail", v)
	}
	if v := statusField(status, "NoNewPrivs"); v != "1" {
		return nil, fmt.Errorf("NoNewPrivs is %q, not 1: not inside a cco jail", v)
	}
	ro, found, err := markerMount()
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%s is not a mount point: not inside a cco jail", MarkerPath)
	}
	if !ro {
		return nil, fmt.Errorf("%s is mounted read-write: not a cco jail marker", MarkerPath)
	}
	b, err := os.ReadFile(MarkerPath)
	if err != nil {
		return nil, fmt.Errorf("reading the jail marker: %w", err)
	}
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil || m.Schema != MarkerSchema || m.Agent == "" {
		return nil, errors.New("the jail marker " + MarkerPath + " is not a cco marker")
	}
	return &m, nil
}

// markerMount tells whether MarkerPath is a mount point and whether the
// mount on top is read-only: from statx's mount-root attribute and statfs's
// flags where the kernel has the attribute (Linux 5.8), which a jail's pid 1
// asks at every launch; from the mount table otherwise.
func markerMount() (ro, found bool, err error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, MarkerPath, unix.AT_SYMLINK_NOFOLLOW, 0, &st); err == nil && st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		if st.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 {
			return false, false, nil
		}
		var fs unix.Statfs_t
		if err := unix.Statfs(MarkerPath, &fs); err != nil {
			return false, false, fmt.Errorf("the jail marker's mount: %w", err)
		}
		return fs.Flags&unix.ST_RDONLY != 0, true, nil
	}
	mi, err := os.ReadFile(procRoot + "/self/mountinfo")
	if err != nil {
		return false, false, fmt.Errorf("reading %s/self/mountinfo: %w", procRoot, err)
	}
	ro, found = mountReadOnly(mi, MarkerPath)
	return ro, found, nil
}

func statusField(status []byte, key string) string {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// mountReadOnly finds the last mount at mountpoint in a mountinfo table (the
// one on top) and reports whether it is read-only.
func mountReadOnly(mountinfo []byte, mountpoint string) (ro, found bool) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || unescapeMount(f[4]) != mountpoint {
			continue
		}
		found = true
		ro = false
		for _, o := range strings.Split(f[5], ",") {
			if o == "ro" {
				ro = true
			}
		}
	}
	return ro, found
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
