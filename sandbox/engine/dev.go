package engine

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// devNodes are the host's devices the jail's /dev holds, as bwrap's --dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// dev makes the jail's /dev at p: a tmpfs with the usual devices bound from
// the host, a private devpts (the agent's pty is the jail's own: nothing
// reaches the user's terminal from it), /dev/shm and the usual links.
func (b *builder) dev(p string) error {
	fd, err := tmpfs(0o755, 0, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("the jail's /dev: %w", err)
	}
	defer unix.Close(fd)
	if err := b.attach(fd, p, false); err != nil {
		return err
	}
	dir, err := b.target(p, false)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	for _, n := range devNodes {
		src, err := b.hostPath("/dev/" + n)
		if err != nil {
			return err
		}
		// Devices must stay usable: nosuid, not nodev.
		t, err := clone(src, unix.MOUNT_ATTR_NOSUID)
		unix.Close(src)
		if err != nil {
			return fmt.Errorf("binding /dev/%s: %w", n, err)
		}
		err = attachIn(dir, n, t, true)
		unix.Close(t)
		if err != nil {
			return fmt.Errorf("binding /dev/%s: %w", n, err)
		}
	}
	for _, d := range []string{"shm", "pts"} {
		if err := unix.Mkdirat(dir, d, 0o755); err != nil {
			return fmt.Errorf("the jail's /dev/%s: %w", d, err)
		}
	}
	pts, err := devpts()
	if err != nil {
		return fmt.Errorf("the jail's devpts: %w", err)
	}
	err = attachIn(dir, "pts", pts, false)
	unix.Close(pts)
	if err != nil {
		return fmt.Errorf("the jail's devpts: %w", err)
	}
	links := [][2]string{{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
		{"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}, {"/proc/kcore", "core"}}
	for _, l := range links {
		if err := unix.Symlinkat(l[0], dir, l[1]); err != nil {
			return fmt.Errorf("the jail's /dev/%s: %w", l[1], err)
		}
	}
	return nil
}

// attachIn moves the detached mount src onto name in dir, made first.
func attachIn(dir int, name string, src int, file bool) error {
	if file {
		f, err := unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
		if err != nil {
			return err
		}
		unix.Close(f)
	}
	t, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(t)
	return unix.MoveMount(src, "", t, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

// devpts is a new devpts instance, as bwrap makes it.
func devpts() (int, error) {
	fs, err := unix.Fsopen("devpts", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetFlag(fs, "newinstance"); err != nil {
		return -1, err
	}
	for _, kv := range [][2]string{{"ptmxmode", "0666"}, {"mode", "620"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, err
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, err
	}
	return unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
}

// procCovers are the parts of /proc bound read-only over themselves, as
// bwrap covers them: the kernel's settings and triggers.
var procCovers = []string{"sys", "sysrq-trigger", "irq", "bus"}

// proc mounts the jail's pid namespace's /proc at p, with its covers. With
// disableUserns the jail's user namespace gets a limit of 0 namespaces
// first (bwrap's --disable-userns): nothing in the jail makes another.
func (b *builder) proc(p string, disableUserns bool) error {
	fs, err := unix.Fsopen("proc", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("the jail's /proc: %w", err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		unix.Close(fs)
		return fmt.Errorf("the jail's /proc: %w", err)
	}
	fd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	unix.Close(fs)
	if err != nil {
		return fmt.Errorf("the jail's /proc: %w", err)
	}
	defer unix.Close(fd)
	if disableUserns {
		w, err := unix.Openat(fd, "sys/user/max_user_namespaces", unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err == nil {
			_, err = unix.Write(w, []byte("0\n"))
			unix.Close(w)
		}
		if err != nil {
			return fmt.Errorf("the jail's user namespace limit: %w", err)
		}
	}
	if err := b.attach(fd, p, false); err != nil {
		return err
	}
	for _, c := range procCovers {
		dst := strings.TrimSuffix(p, "/") + "/" + c
		src, err := b.target(dst, false)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return err
		}
		t, err := clone(src, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
		if err == nil {
			err = unix.MoveMount(t, "", src, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
			unix.Close(t)
		}
		unix.Close(src)
		if err != nil {
			return fmt.Errorf("covering the jail's /proc/%s: %w", c, err)
		}
	}
	return nil
}

// capLast is the highest capability this kernel knows.
func capLast() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return 63
}
