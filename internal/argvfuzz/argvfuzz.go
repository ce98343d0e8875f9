// Package argvfuzz turns a fuzzed string into a command line, for the fuzz
// targets of the argument rules (the agents' rewriters, the app-server's).
package argvfuzz

import "strings"

// Split cuts s into arguments at NUL, the one byte no argv entry can hold.
// The empty string is no arguments at all.
func Split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// Join is Split's inverse, for seeding a target with command lines.
func Join(args ...string) string { return strings.Join(args, "\x00") }

// IsSubsequence reports whether every element of sub appears in s, in
// order. A rewriter that only drops and inserts its own words keeps the
// user's words a subsequence of its input.
func IsSubsequence(sub, s []string) bool {
	i := 0
	for _, x := range s {
		if i < len(sub) && sub[i] == x {
			i++
		}
	}
	return i == len(sub)
}
