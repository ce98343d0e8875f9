// Package treehash describes a directory tree, entry by entry, so a test
// can tell whether anything below it changed. It imports nothing of the
// project, so that any package's tests can use it, provision's own too.
package treehash

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// Describe lists every entry below dir (dir itself too), one sorted line
// each: the path relative to dir, the type and mode, the owner, and the
// content's hash or the link's target. With times it adds the size and the
// mtime, which a copy or a second run sets anew.
func Describe(dir string, times bool) (string, error) {
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner to read", p)
		}
		rel, _ := filepath.Rel(dir, p)
		line := fmt.Sprintf("%s %v %d:%d", rel, fi.Mode(), st.Uid, st.Gid)
		if times {
			line += fmt.Sprintf(" %d %d", fi.Size(), st.Mtim.Nano())
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + l
		case fi.Mode().IsRegular():
			sum, err := fileSum(p)
			if err != nil {
				return err
			}
			line += " " + sum
		}
		lines = append(lines, line)
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n"), err
}

func fileSum(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// HashDir is one hash of Describe with times: equal hashes mean that
// nothing below dir was written, touched, chmodded, chowned, created or
// removed.
func HashDir(dir string) (string, error) {
	d, err := Describe(dir, true)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256([]byte(d))
	return hex.EncodeToString(s[:]), nil
}

// Hash is HashDir, failing the test on an error.
func Hash(t testing.TB, dir string) string {
	t.Helper()
	h, err := HashDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Shape is Describe without times, failing the test on an error. It is
// readable, for a failure message that shows what differs.
func Shape(t testing.TB, dir string) string {
	t.Helper()
	d, err := Describe(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// List names every entry below dir, relative to it and sorted, for a
// failure message or to assert that nothing appeared.
func List(dir string) []string {
	var names []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			names = append(names, rel)
		}
		return nil
	})
	return names
}
