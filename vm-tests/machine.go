package vmtests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Machine is a Debian root started in its own mount, pid, uts, ipc and
// network namespaces. Its "/" is a pivot_root, not a chroot: a process
// inside is not chrooted in the kernel's eyes, so bubblewrap can still make
// its user namespace there (the kernel refuses that to a chrooted caller).
// Its network namespace has only loopback: nothing inside can reach out.
type Machine struct {
	// Root is the machine's "/" seen from the host. Write files into it
	// (not under /proc, /dev, /sys, /run: those are the machine's mounts).
	Root string
	cmd  *exec.Cmd
	pid  int // the machine's pid 1, as the host sees it
}

// Result is what a command inside the machine did.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// bootScript runs on the host inside the fresh namespaces: mounts the machine's
// filesystems, brings up loopback, pivots into the root and idles as pid 1.
const bootScript = `set -eu
R=$1
mount --bind "$R" "$R"
mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$R/sys"
mount -t tmpfs -o mode=755,nosuid run "$R/run"
mount -t tmpfs -o mode=755,nosuid dev "$R/dev"
for n in null zero full random urandom tty; do
	touch "$R/dev/$n"
	mount --bind "/dev/$n" "$R/dev/$n"
done
mkdir "$R/dev/pts" "$R/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$R/dev/pts"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$R/dev/shm"
ln -s pts/ptmx "$R/dev/ptmx"
ln -s /proc/self/fd "$R/dev/fd"
ln -s /proc/self/fd/0 "$R/dev/stdin"
ln -s /proc/self/fd/1 "$R/dev/stdout"
ln -s /proc/self/fd/2 "$R/dev/stderr"
hostname cco-vm
ip link set lo up
# The image has no umount (Debian's mount package is not essential): borrow
# the host's for the one detach, from the machine's /run tmpfs.
cp "$(command -v umount)" "$R/run/umount"
mkdir "$R/run/oldroot"
cd "$R"
pivot_root . run/oldroot
cd /
exec /bin/sh -c '/run/umount -l /run/oldroot && rmdir /run/oldroot && rm /run/umount && echo ready && exec sleep infinity'
`

// Start unpacks image into dir and boots it.
func Start(ctx context.Context, image, dir string) (*Machine, error) {
	for _, tool := range []string{"unshare", "nsenter", "pivot_root", "ip", "tar", "zstd"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("the vm-tests need %s on the host (util-linux, iproute2, tar, zstd)", tool)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	if out, err := exec.CommandContext(ctx, "tar", "--zstd", "--numeric-owner", "-xpf", image, "-C", dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("unpacking %s into %s: %v\n%s", image, dir, err, out)
	}
	m := &Machine{Root: dir}
	m.cmd = exec.Command("unshare", "--mount", "--pid", "--uts", "--ipc", "--net", "--fork",
		"--kill-child", "--propagation", "private", "/bin/sh", "-c", bootScript, "boot", dir)
	var stderr bytes.Buffer
	m.cmd.Stderr = &stderr
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the machine in %s: %w", dir, err)
	}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-time.After(30 * time.Second):
		err = errors.New("no sign of life in 30s")
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("booting the machine in %s: %v\n%s", dir, err, stderr.String())
	}
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", m.cmd.Process.Pid, m.cmd.Process.Pid))
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("finding the machine's pid 1: %w", err)
	}
	if m.pid, err = strconv.Atoi(strings.TrimSpace(string(kids))); err != nil {
		m.Close()
		return nil, fmt.Errorf("finding the machine's pid 1 in %q: %w", kids, err)
	}
	return m, nil
}

// Close stops the machine: its pid 1 dies with unshare (--kill-child), and
// every process and mount of the machine with it.
func (m *Machine) Close() error {
	if m.cmd == nil || m.cmd.Process == nil {
		return nil
	}
	m.cmd.Process.Signal(syscall.SIGKILL)
	m.cmd.Wait()
	m.cmd = nil
	return nil
}

// User is who runs a command: "root" or a user created by AddUser.
type User struct {
	Name     string
	UID, GID int
	Home     string
}

// Root is the machine's root user.
var Root = User{Name: "root", Home: "/root"}

// Exec runs argv inside the machine as u, in dir, with a clean environment
// plus env ("K=V").
func (m *Machine) Exec(ctx context.Context, u User, dir string, env []string, argv ...string) Result {
	args := []string{"-t", strconv.Itoa(m.pid), "-m", "-u", "-i", "-n", "-p", "-r", "-w", "--"}
	if u.Name != "root" {
		args = append(args, "setpriv", "--reuid="+strconv.Itoa(u.UID), "--regid="+strconv.Itoa(u.GID), "--init-groups", "--")
	}
	args = append(args, "/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name, "LANG=C.UTF-8", "TERM=dumb")
	args = append(args, env...)
	args = append(args, "/bin/sh", "-c", `cd "$0" && exec "$@"`, dir)
	args = append(args, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		r.Code = -1
		r.Stderr += "\n" + err.Error()
	}
	return r
}

// AddUser creates a normal user with a home directory.
func (m *Machine) AddUser(ctx context.Context, name string) (User, error) {
	if r := m.Exec(ctx, Root, "/", nil, "useradd", "--create-home", "--shell", "/bin/sh", name); r.Code != 0 {
		return User{}, fmt.Errorf("useradd %s: exit %d: %s", name, r.Code, r.Stderr)
	}
	r := m.Exec(ctx, Root, "/", nil, "id", "-u", name)
	uid, err1 := strconv.Atoi(strings.TrimSpace(r.Stdout))
	r = m.Exec(ctx, Root, "/", nil, "id", "-g", name)
	gid, err2 := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if err := errors.Join(err1, err2); err != nil {
		return User{}, fmt.Errorf("id %s: %w", name, err)
	}
	return User{Name: name, UID: uid, GID: gid, Home: "/home/" + name}, nil
}

// Put copies a host file into the machine at target with mode.
func (m *Machine) Put(src, target string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	dst := filepath.Join(m.Root, target)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(dst), err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return os.Chmod(dst, mode)
}

// WriteEnter writes a host script that runs "$2 $3 ..." inside the machine
// as root, refusing any first argument but the machine's Root: the shape
// of chroot(8)'s command line, so tools that drive a chroot (Ansible's
// chroot connection, via ansible_chroot_exe) drive the machine instead,
// inside its namespaces.
func (m *Machine) WriteEnter(path string) error {
	script := fmt.Sprintf(`#!/bin/sh
[ "$1" = %q ] || { echo "this enters only the machine at %s, not $1" >&2; exit 125; }
shift
exec nsenter -t %d -m -u -i -n -p -r -w -- /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root USER=root LANG=C.UTF-8 "$@"
`, m.Root, m.Root, m.pid)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
