package engine

import (
	"fmt"
	"os"
	"strconv"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Landlock is the second layer under the mounts: where the kernel has it,
// the agent may write only in the trees the spec makes writable (the
// workspace, the login state, the caches, the jail's own tmpfs), whatever a
// mount would allow. Reads and execution are the mounts' alone: the rights
// handled are the writing ones.

// writeRights are the rights a writable directory keeps; a writable file
// keeps fileRights.
const (
	writeRights = ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock |
		ll.AccessFSMakeSym | ll.AccessFSTruncate | ll.AccessFSRefer
	fileRights = ll.AccessFSWriteFile | ll.AccessFSTruncate
)

// devWritable are the jail's own devices and its devpts, always writable.
var devWritable = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/pts"}

// LandlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func LandlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// Layer is the marker's name of the Landlock layer at abi, "" for none.
func Layer(abi int) string {
	if abi <= 0 {
		return ""
	}
	return "landlock:" + strconv.Itoa(abi)
}

// landlockRestrict puts this process and every later one of the jail under
// a ruleset that lets them write only below writable (paths in the jail; a
// missing one is skipped, a file keeps only its own writing rights).
func landlockRestrict(writable []string) error {
	var dirs, files []string
	for _, p := range append(append([]string(nil), devWritable...), writable...) {
		st, err := os.Stat(p)
		switch {
		case err != nil:
			continue // a Try bind the jail went without
		case st.IsDir():
			dirs = append(dirs, p)
		default:
			files = append(files, p)
		}
	}
	cfg := landlock.Config{HandledAccessFS: writeRights}.BestEffort()
	if err := cfg.RestrictPaths(landlock.PathAccess(writeRights, dirs...), landlock.PathAccess(fileRights, files...)); err != nil {
		return fmt.Errorf("the Landlock ruleset: %w", err)
	}
	return nil
}
