package trust

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// dirFile is a trust file named in a directory held open: the directory
// was reached from the home without following a link, so that a session
// that swapped a directory for a link cannot steer a write elsewhere.
type dirFile struct {
	dir  int
	name string
}

// open reaches the list file's directory: the home as the user's (it may
// itself be reached through a link, which is the user's), every element
// below it with O_NOFOLLOW.
func open(l List) (*dirFile, error) {
	rel := filepath.Clean(l.File)
	if filepath.IsAbs(rel) || rel == "." || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("trust file %q is not below the home", l.File)
	}
	fd, err := unix.Open(l.Home, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	elems := strings.Split(rel, "/")
	for _, e := range elems[:len(elems)-1] {
		next, err := unix.Openat(fd, e, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return nil, err
		}
		fd = next
	}
	return &dirFile{dir: fd, name: elems[len(elems)-1]}, nil
}

func (f *dirFile) close() { unix.Close(f.dir) }

var errNotRegular = errors.New("not a regular file")

// read reads the file without following a link or waiting on a FIFO, at
// most MaxFile bytes.
func (f *dirFile) read() ([]byte, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(f.dir, f.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, st, errors.New("a link")
		}
		if errors.Is(err, unix.ENXIO) || errors.Is(err, unix.EISDIR) {
			return nil, st, errNotRegular
		}
		return nil, st, err
	}
	file := os.NewFile(uintptr(fd), f.name)
	defer file.Close()
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, st, errNotRegular
	}
	if st.Size > MaxFile {
		return nil, st, fmt.Errorf("larger than %d bytes", MaxFile)
	}
	b, err := io.ReadAll(io.LimitReader(file, MaxFile+1))
	if err != nil {
		return nil, st, err
	}
	if len(b) > MaxFile {
		return nil, st, fmt.Errorf("larger than %d bytes", MaxFile)
	}
	return b, st, nil
}

// errChanged: the file changed between the read and the rename.
var errChanged = errors.New("the file changed meanwhile")

// replace puts b in place of the file by rename, with the mode and owner
// given. With was set (the stat of the file read), the rename happens only
// if the file is still that one, unchanged: else errChanged.
func (f *dirFile) replace(b []byte, mode uint32, uid, gid int, was *unix.Stat_t) error {
	if mode == 0 {
		mode = 0o600
	}
	tmp := "." + f.name + ".cco-trust-" + strconv.Itoa(os.Getpid())
	unix.Unlinkat(f.dir, tmp, 0)
	fd, err := unix.Openat(f.dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode&0o777)
	if err != nil {
		return err
	}
	file := os.NewFile(uintptr(fd), tmp)
	done := false
	defer func() {
		if !done {
			unix.Unlinkat(f.dir, tmp, 0)
		}
	}()
	_, err = file.Write(b)
	if err == nil && os.Geteuid() == 0 {
		err = unix.Fchown(fd, uid, gid)
	}
	if err == nil {
		err = unix.Fchmod(fd, mode&0o777)
	}
	if err == nil {
		err = file.Sync()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if was != nil {
		var st unix.Stat_t
		if err := unix.Fstatat(f.dir, f.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil ||
			st.Dev != was.Dev || st.Ino != was.Ino || st.Size != was.Size || st.Mtim != was.Mtim || st.Ctim != was.Ctim {
			return errChanged
		}
	}
	err = unix.Renameat(f.dir, tmp, f.dir, f.name)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		// A directory the session made in the file's place: removed when
		// empty, and then the rename is tried again.
		if err = unix.Unlinkat(f.dir, f.name, unix.AT_REMOVEDIR); err == nil {
			err = unix.Renameat(f.dir, tmp, f.dir, f.name)
		}
	}
	if err != nil {
		return err
	}
	done = true
	f.syncDir()
	return nil
}

// remove unlinks the entry (a link, a FIFO, a file; an empty directory).
func (f *dirFile) remove() error {
	err := unix.Unlinkat(f.dir, f.name, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(f.dir, f.name, unix.AT_REMOVEDIR)
	}
	if err == nil {
		f.syncDir()
	}
	return err
}

func (f *dirFile) syncDir() {
	// An O_PATH descriptor cannot be synced: reopen the directory it holds.
	if fd, err := unix.Openat(f.dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		unix.Fsync(fd)
		unix.Close(fd)
	}
}
