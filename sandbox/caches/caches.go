// Package caches decides where the jail's dependency caches live.
//
// Package managers and build tools keep their caches at fixed places in
// the home (~/.cache, ~/.npm, ~/go/pkg/mod, ~/.cargo/registry ...). The
// jail's home is private, so without help every session would start cold.
// The caches instead live in a tree that cco owns, one per user and per
// agent (~/.cache/cco/<agent> on the host), shown in the jail at the
// tools' default places. No host tool reads that tree: the host's own
// ~/.cache, ~/.npm and module cache are never bound, so nothing a session
// plants in a cache is ever built or run by the user's own tools, and a
// cache that one agent poisons never reaches another agent's session,
// which holds the other login.
//
// The whole tree is one bind, at ~/.cache in the jail; every other place
// is a link into it. A link costs the jail nothing, where each bind costs
// bwrap a read of the mount table.
package caches

import (
	"fmt"
	"path/filepath"
)

// Modes of the caches key.
const (
	// Persist keeps the caches between sessions (the default).
	Persist = "persist"
	// Session gives each session empty caches in memory.
	Session = "session"
)

// Root is the home-relative directory of all agents' cache trees on the
// host; an agent's is Root/<agent>.
const Root = ".cache/cco"

// Home is where, in the jail, the agent's cache tree is shown: the XDG
// cache directory, which pip, uv, go-build, yarn, deno and most others
// use.
const Home = ".cache"

// Place is one tool's cache at its default place in the jail.
type Place struct {
	// Jail is the default place, home-relative.
	Jail string
	// Name is its directory in the agent's cache tree, below Home: a
	// name no tool that writes to ~/.cache would choose.
	Name string
}

// Places are the caches kept besides ~/.cache itself.
var Places = []Place{
	{".npm", "cco-npm"},                           // npm's cache (npm config get cache)
	{"go/pkg/mod", "cco-go-mod"},                  // Go's module cache (GOMODCACHE, GOPATH=~/go)
	{".cargo/registry", "cco-cargo-registry"},     // cargo's registry index and crates
	{".cargo/git", "cco-cargo-git"},               // cargo's git dependencies
	{".m2/repository", "cco-m2-repository"},       // Maven's local repository
	{".gradle/caches", "cco-gradle-caches"},       // Gradle's caches
	{".gradle/wrapper", "cco-gradle-wrapper"},     // Gradle wrapper distributions
	{".bun/install/cache", "cco-bun-cache"},       // bun's package cache
	{".local/share/pnpm/store", "cco-pnpm-store"}, // pnpm's content-addressable store
}

// Check validates the caches key's value.
func Check(mode string) error {
	switch mode {
	case "", Persist, Session:
		return nil
	}
	return fmt.Errorf("caches %q is not %q or %q", mode, Persist, Session)
}

// Dir is the host directory of agent's cache tree in home.
func Dir(home, agent string) string { return filepath.Join(home, Root, agent) }

// Target is what the link at p.Jail points to: p's directory in the
// jail's ~/.cache, relative to the link, so that it means the same
// wherever the home is.
func (p Place) Target() string {
	rel, err := filepath.Rel(filepath.Dir(p.Jail), filepath.Join(Home, p.Name))
	if err != nil {
		return filepath.Join("/", Home, p.Name) // unreachable: both are relative
	}
	return rel
}
