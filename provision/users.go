package provision

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// User is an account of the target system, read from <root>/etc/passwd:
// never from the host's user database, which under --root is another system.
type User struct {
	Name  string
	UID   int
	GID   int
	Home  string
	Shell string
}

// LookupUser finds name in the target's /etc/passwd.
func LookupUser(root FileReader, name string) (*User, error) {
	users, err := Users(root)
	if err != nil {
		return nil, err
	}
	for _, u := range users {
		if u.Name == name {
			return u, nil
		}
	}
	return nil, fmt.Errorf("user %q is not in %s", name, root.HostPath("/etc/passwd"))
}

// LookupUID finds the account with uid in the target's /etc/passwd.
func LookupUID(root FileReader, uid int) (*User, error) {
	users, err := Users(root)
	if err != nil {
		return nil, err
	}
	for _, u := range users {
		if u.UID == uid {
			return u, nil
		}
	}
	return nil, fmt.Errorf("uid %d is not in %s", uid, root.HostPath("/etc/passwd"))
}

// Users lists the target's accounts; a missing /etc/passwd is an empty list.
func Users(root FileReader) ([]*User, error) {
	b, err := root.ReadFile("/etc/passwd")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	users, err := ParsePasswd(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", root.HostPath("/etc/passwd"), err)
	}
	return users, nil
}

// ParsePasswd parses passwd(5) lines; a malformed line is an error naming
// the line (Users adds the file). Comments, blank lines and NIS "+"/"-"
// entries are skipped.
func ParsePasswd(b []byte) ([]*User, error) {
	var users []*User
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != 7 {
			return nil, fmt.Errorf("passwd line %d: want 7 fields, have %d: fix or remove the line", n, len(f))
		}
		uid, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("passwd line %d: uid %q is not a number: fix or remove the line", n, f[2])
		}
		gid, err := strconv.Atoi(f[3])
		if err != nil {
			return nil, fmt.Errorf("passwd line %d: gid %q is not a number: fix or remove the line", n, f[3])
		}
		users = append(users, &User{Name: f[0], UID: uid, GID: gid, Home: f[5], Shell: f[6]})
	}
	return users, sc.Err()
}
