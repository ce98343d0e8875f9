package provision

import (
	"strings"
	"testing"
)

func TestParsePasswd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		want  []User
		error string // substring of the error; "" for none
	}{
		{name: "good", in: "root:x:0:0:root:/root:/bin/bash\nada:x:1000:1001:Ada L,,,:/home/ada:/bin/zsh\n",
			want: []User{{"root", 0, 0, "/root", "/bin/bash"}, {"ada", 1000, 1001, "/home/ada", "/bin/zsh"}}},
		{name: "comments blanks and NIS", in: "# a comment\n\n   \n+@netgroup::::::\n-bad::::::\nbob:x:7:8::/home/bob:\n",
			want: []User{{"bob", 7, 8, "/home/bob", ""}}},
		{name: "no final newline", in: "c:x:1:2::/h:/s", want: []User{{"c", 1, 2, "/h", "/s"}}},
		{name: "empty", in: "", want: nil},
		{name: "too few fields", in: "root:x:0:0:root:/root:/bin/bash\nbroken:x:1:1\n", error: "line 2: want 7 fields, have 4"},
		{name: "too many fields", in: "a:x:1:1:g:/h:/s:extra\n", error: "line 1: want 7 fields, have 8"},
		{name: "uid not a number", in: "a:x:one:1::/h:/s\n", error: `line 1: uid "one" is not a number`},
		{name: "gid not a number", in: "a:x:1:-:g:/h:/s\n", error: `line 1: gid "-" is not a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			users, err := ParsePasswd([]byte(tc.in))
			if tc.error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.error) {
					t.Fatalf("error = %v, want one containing %q", err, tc.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(users) != len(tc.want) {
				t.Fatalf("got %d users, want %d: %+v", len(users), len(tc.want), users)
			}
			for i, u := range users {
				if *u != tc.want[i] {
					t.Errorf("user %d = %+v, want %+v", i, *u, tc.want[i])
				}
			}
		})
	}
}

// The target's accounts come from <root>/etc/passwd: the test machine's own
// root (uid 0, /root) must never be what a lookup under --root finds.
func TestLookupUserReadsTheRoot(t *testing.T) {
	r := newRoot(t)
	writeHost(t, r.HostPath("/etc/passwd"), []byte("root:x:777:778:not the host:/srv/rootnothome:/bin/sh\nada:x:1000:1000::/home/ada:/bin/bash\n"), 0o644)
	u, err := LookupUser(r, "root")
	if err != nil {
		t.Fatal(err)
	}
	if u.UID != 777 || u.Home != "/srv/rootnothome" {
		t.Fatalf("root = %+v: read from the host, not from %s", u, r.HostPath("/etc/passwd"))
	}
	if u, err := LookupUID(r, 1000); err != nil || u.Name != "ada" {
		t.Fatalf("LookupUID(1000) = %+v, %v", u, err)
	}
	_, err = LookupUser(r, "nobody-here")
	if err == nil || !strings.Contains(err.Error(), r.HostPath("/etc/passwd")) {
		t.Fatalf("a missing user: %v, want an error naming %s", err, r.HostPath("/etc/passwd"))
	}
	if _, err := LookupUID(r, 4242); err == nil || !strings.Contains(err.Error(), "4242") {
		t.Fatalf("a missing uid: %v", err)
	}

	// A root without /etc/passwd has no users, not the host's.
	empty := newRoot(t)
	if users, err := Users(empty); err != nil || len(users) != 0 {
		t.Fatalf("Users of an empty root = %v, %v", users, err)
	}
	if _, err := LookupUser(empty, "root"); err == nil {
		t.Fatal("LookupUser found root in a root with no /etc/passwd")
	}

	// A malformed file is an error naming the file and the line.
	writeHost(t, r.HostPath("/etc/passwd"), []byte("ada:x:1000\n"), 0o644)
	_, err = LookupUser(r, "ada")
	if err == nil || !strings.Contains(err.Error(), r.HostPath("/etc/passwd")) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("malformed passwd: %v, want an error naming the file and line", err)
	}
}
