package sandbox

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The jail's scratch space and process count are bounded, so that a
// session cannot take the machine's memory (every tmpfs is memory) or its
// process table.

// DefaultMaxProcs is max_procs's default.
const DefaultMaxProcs = 4096

// Size is tmpfs_size: bytes, or a percentage of the machine's RAM ("50%").
type Size struct {
	Bytes   int64
	Percent float64
}

// UnmarshalTOML reads an integer (bytes) or a string "N%".
func (z *Size) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		if x <= 0 {
			return fmt.Errorf("tmpfs_size %d is not a positive number of bytes", x)
		}
		z.Bytes = x
		return nil
	case string:
		n, ok := strings.CutSuffix(strings.TrimSpace(x), "%")
		if ok {
			if p, err := strconv.ParseFloat(n, 64); err == nil && p > 0 && p <= 100 {
				z.Percent = p
				return nil
			}
		}
	}
	return fmt.Errorf("tmpfs_size %v is neither bytes (an integer) nor a percentage of RAM such as \"50%%\"", v)
}

// total is the size for a machine with ram bytes: half of it by default.
func (z Size) total(ram int64) int64 {
	switch {
	case z.Bytes > 0:
		return z.Bytes
	case z.Percent > 0:
		return int64(float64(ram) * z.Percent / 100)
	}
	return ram / 2
}

// machineRAM is the machine's total RAM in bytes.
func machineRAM() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// minTmpfs keeps a share from rounding to nothing.
const minTmpfs = 1 << 20

// tmpfsSizes shares total between the jail's writable tmpfs mounts: /tmp
// takes four shares and ~/.cache two (builds and package managers write
// there), every other one share. Their sum is at most total.
func tmpfsSizes(s *Spec, total int64) map[string]int64 {
	weights := map[string]int64{}
	add := func(p string, w int64) { weights[p] = w }
	for _, p := range s.Private {
		add(p, 1)
	}
	for _, m := range s.Masks {
		if m.Kind == MaskTmpfs {
			add(m.Path, 1)
		}
	}
	for _, d := range s.Scratch {
		add(d, 2)
	}
	add("/tmp", 4)
	add(devShm, 1)
	var sum int64
	for _, w := range weights {
		sum += w
	}
	out := make(map[string]int64, len(weights))
	for p, w := range weights {
		n := total / sum * w
		if n < minTmpfs {
			n = minTmpfs
		}
		out[p] = n
	}
	return out
}

// devShm is /dev/shm: bwrap's --dev makes it a directory on /dev's own
// tmpfs, unbounded, so the jail mounts a sized tmpfs there.
const devShm = "/dev/shm"

// WithProcLimit runs start (which forks bwrap) with RLIMIT_NPROC at n, then
// puts the launcher's own limit back: the jail inherits n. The kernel counts
// the processes of the jail's user, and exempts root's: root's jail is bounded
// by its own mapping (see ADR 25).
func WithProcLimit(n int, start func() error) error {
	if n <= 0 {
		return start()
	}
	var old unix.Rlimit
	if err := unix.Prlimit(0, unix.RLIMIT_NPROC, nil, &old); err != nil {
		return start()
	}
	lim := unix.Rlimit{Cur: uint64(n), Max: old.Max}
	if lim.Cur > old.Max {
		lim.Cur = old.Max
	}
	if err := unix.Prlimit(0, unix.RLIMIT_NPROC, &lim, nil); err != nil {
		return fmt.Errorf("bounding the jail's processes at %d (max_procs in %s): %w", n, ConfigPath, err)
	}
	err := start()
	unix.Prlimit(0, unix.RLIMIT_NPROC, &old, nil)
	return err
}
