package sandbox

import (
	"os"
	"path/filepath"
)

// Bounds of FindRepos's walk.
const (
	repoWalkDepth   = 3
	repoWalkMaxDirs = 512
)

// FindRepos lists the .git entries at or below ws, breadth-first, at most
// repoWalkDepth levels down and repoWalkMaxDirs directories read.
func FindRepos(ws string) []string {
	var out []string
	level := []string{ws}
	read := 0
	for depth := 0; depth <= repoWalkDepth && len(level) > 0; depth++ {
		var next []string
		for _, d := range level {
			if read >= repoWalkMaxDirs {
				return out
			}
			read++
			ents, err := os.ReadDir(d)
			if err != nil {
				continue
			}
			for _, e := range ents {
				n := e.Name()
				if n == ".git" {
					out = append(out, filepath.Join(d, n))
					continue
				}
				if e.IsDir() && n != "node_modules" {
					next = append(next, filepath.Join(d, n))
				}
			}
		}
		level = next
	}
	return out
}
