package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/cco-dev/cco/internal/safetext"
	"github.com/cco-dev/cco/sandbox/saferead"
	"github.com/cco-dev/cco/sandbox/trust"
	"github.com/cco-dev/cco/sandbox/workspace"
)

// The post-session audit of the state files: what a session added that a
// host program would run.

// watch snapshots the watched state files and the protected paths'
// inodes (the placeholders exist by now).
func (s *Session) watch(pr *Prep) {
	if len(pr.Watched) > 0 {
		s.watched = map[string]map[string]string{}
		for _, w := range pr.Watched {
			s.watched[w], _ = CommandEntries(w)
		}
	}
	s.protected = workspace.StampProtected(pr.Protected)
	s.trust = trust.Take(pr.Trust)
}

// RestoreTrust puts each trust key of the agent's state that the session
// changed back to its value at launch, keeping the rest of the file (the
// login's refresh), and says so in one line per file (sandbox/trust).
func (s *Session) RestoreTrust() []string { return s.trust.Restore() }

// Tampered lists each protected path that something replaced, renamed or
// removed during the session.
func (s *Session) Tampered() []string { return s.protected.Tampered() }

// WatchRepos snapshots, at launch, the git files of the repositories
// the plan found in the workspace ws, its sourced files and the agent
// config in its subdirectories, for the audit after the session.
func (s *Session) WatchRepos(ws string, repos, agentDirs []string) {
	s.snap = workspace.Take(ws, repos, agentDirs)
}

// Added lists, one line each, the command-bearing entries the session added
// or changed in the watched state files, and what git would run from a
// config, hook or redirect created or changed in the workspace's
// repositories and the files host tools source (workspace.Snapshot).
func (s *Session) Added() []string {
	var out []string
	for _, path := range slices.Sorted(maps.Keys(s.watched)) {
		before := s.watched[path]
		after, err := CommandEntries(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			out = append(out, fmt.Sprintf("%s: cannot be read after the session (%v); check its mcpServers yourself", safetext.Escape(path), safetext.Escape(err.Error())))
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(after)) {
			if v := after[k]; before[k] != v {
				scope, name, _ := strings.Cut(k, "\x00")
				out = append(out, fmt.Sprintf("%s: mcpServers %q (%s) runs %s", safetext.Escape(path), name, safetext.Escape(scope), safetext.Escape(v)))
			}
		}
	}
	return append(out, s.snap.Warnings()...)
}

// CommandEntries reads the command-bearing entries of a claude state file:
// every mcpServers entry with a command, at the top level and per project,
// keyed by scope and name, valued by the entry's JSON. The file is read
// through saferead.ReadCapped; one it cannot read is the error (a file that is not
// JSON has no entries).
func CommandEntries(path string) (map[string]string, error) {
	out := map[string]string{}
	b, err := saferead.ReadCapped(path)
	if err != nil {
		return out, err
	}
	var st struct {
		MCP      map[string]json.RawMessage `json:"mcpServers"`
		Projects map[string]struct {
			MCP map[string]json.RawMessage `json:"mcpServers"`
		} `json:"projects"`
	}
	if json.Unmarshal(b, &st) != nil {
		return out, nil
	}
	add := func(scope string, m map[string]json.RawMessage) {
		for name, raw := range m {
			var e struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
			}
			if json.Unmarshal(raw, &e) == nil && e.Command != "" {
				out[scope+"\x00"+name] = strings.TrimSpace(e.Command + " " + strings.Join(e.Args, " "))
			}
		}
	}
	add("global", st.MCP)
	for p, v := range st.Projects {
		add("project "+p, v.MCP)
	}
	return out, nil
}
