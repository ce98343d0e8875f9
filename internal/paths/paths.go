// Package paths holds the one test of whether a path lies in a tree, which
// the jail's plan, its host view and its toolchains all ask.
package paths

import "strings"

// Within reports whether p is dir or lies below it. Both are clean, and
// both absolute or both relative; "/" holds every absolute path.
func Within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}
