// Package trust keeps every agent's trust list the user's. Some agents keep
// what they trust (folders, a project's MCP servers, its tools) in the same
// file as their login, which must stay writable in the jail so that the
// login refreshes: Copilot CLI's ~/.copilot/config.json (trustedFolders),
// Claude Code's .claude.json (each project's hasTrustDialogAccepted,
// enableAllProjectMcpServers, ...). A session could widen them, and the
// user's next session of that agent, in any folder, would load that
// folder's hooks and MCP servers unasked. So the launch takes each trust
// key's value, and after the session the keys that changed are put back to
// it, in place, while every other key stays as the session left it: the
// login's refresh is kept. Each file put back is named in one line.
//
// A file the session replaced by a link, a FIFO, a device, a directory, a
// file too large to read or one that no longer parses is not read (no
// link followed, no FIFO opened for long): it is replaced whole by the
// file as it was at launch, or removed when there was none. Every step is
// taken on a descriptor of the file's directory (opened from the home
// without following a link), and the new content goes in by rename, so
// that a reader sees the old file or the new one, never a part.
package trust

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tailscale/hujson"
	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/safetext"
)

// MaxFile caps what is read of a trust file. A login state file with a
// project history is larger than most config files, so the cap is above
// saferead's; a larger one is taken as replaced.
const MaxFile = 16 << 20

// List is one trust list: a JSON (or JSONC) file and the keys in it that
// say what the agent trusts.
type List struct {
	// Agent is the agent's name, for the line after the session.
	Agent string
	// Home is the user's home; File is home-relative, and no element of
	// it below the home may be a link.
	Home, File string
	// Keys are member paths, dotted; "*" matches every member of an
	// object ("projects.*.hasTrustDialogAccepted").
	Keys []string
	// Allow are the folders a session may trust: the workspace, which the
	// agent's own trust dialog in the jail names. A "projects" member
	// named so keeps what the session wrote, and a list of folders keeps
	// the entries naming one exactly; every other change is put back.
	Allow []string
}

func (l List) path() string { return filepath.Join(l.Home, l.File) }

// state is a list at launch.
type state struct {
	list List
	// raw is the file at launch (nil: none, or not one cco could read:
	// then a session's file is removed or left, see Restore).
	raw     []byte
	mode    uint32
	uid     int
	gid     int
	existed bool
	// values are the trust keys' values at launch, by JSON pointer.
	values map[string]string
}

// Snapshot is the trust lists at launch.
type Snapshot struct{ states []state }

// Take reads each list's file at launch. A file that is missing has no
// trust key; one that cannot be read or parsed then is kept as it is (its
// values are those the session cannot have written yet, and it is what a
// replaced file is restored to).
func Take(lists []List) *Snapshot {
	s := &Snapshot{}
	for _, l := range lists {
		st := state{list: l, values: map[string]string{}}
		if f, err := open(l); err == nil {
			if b, fi, err := f.read(); err == nil {
				st.existed, st.raw, st.mode, st.uid, st.gid = true, b, fi.Mode&0o7777, int(fi.Uid), int(fi.Gid)
				if v, err := parse(b); err == nil {
					st.values = values(v, l.Keys)
				}
			} else if !errors.Is(err, unix.ENOENT) {
				st.existed = true
			}
			f.close()
		}
		s.states = append(s.states, st)
	}
	return s
}

// Restore puts back, after the session, every trust key that changed, and
// returns one line per file it put back (or could not), naming the keys
// and what the session wrote. Nothing is printed for a file no trust key
// of which changed.
func (s *Snapshot) Restore() []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, st := range s.states {
		if line := st.restore(); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// maxTries is how often a restore is tried when the file changes between
// the read and the rename (the agent outside any jail writing it).
const maxTries = 3

func (st state) restore() string {
	l := st.list
	name := safetext.Escape(l.path())
	f, err := open(l)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return ""
		}
		return fmt.Sprintf("%s: %s's trust list could not be checked after the session (%v); check it before you run %s again", name, l.Agent, safetext.Escape(err.Error()), l.Agent)
	}
	defer f.close()
	for try := 0; try < maxTries; try++ {
		b, fi, err := f.read()
		if errors.Is(err, unix.ENOENT) {
			return "" // the session removed it: no trust is left to widen
		}
		if err != nil {
			return st.replaceWhole(f, err)
		}
		v, err := parse(b)
		if err != nil {
			return st.replaceWhole(f, err)
		}
		now := values(v, l.Keys)
		target := intended(st.values, now, l.Allow)
		changed := changedKeys(target, now)
		if len(changed) == 0 {
			return ""
		}
		if err := patch(&v, target, now); err != nil {
			return fmt.Sprintf("%s: this session changed %s's trust list (%s), and cco could not put it back (%v); fix: remove those keys from the file", name, l.Agent, describe(changed, now), safetext.Escape(err.Error()))
		}
		err = f.replace(v.Pack(), fi.Mode&0o7777, int(fi.Uid), int(fi.Gid), &fi)
		if errors.Is(err, errChanged) {
			continue
		}
		if err != nil {
			return fmt.Sprintf("%s: this session changed %s's trust list (%s), and cco could not put it back (%v); fix: remove those keys from the file", name, l.Agent, describe(changed, now), safetext.Escape(err.Error()))
		}
		return fmt.Sprintf("%s: this session changed %s's trust list (%s); cco put it back as it was at launch, and kept the rest of the file", name, l.Agent, describe(changed, now))
	}
	return fmt.Sprintf("%s: this session changed %s's trust list, and the file kept changing while cco put it back; check it before you run %s again", name, l.Agent, l.Agent)
}

// replaceWhole restores a file the session made unreadable as a trust list
// (why): the file at launch, or none.
func (st state) replaceWhole(f *dirFile, why error) string {
	l := st.list
	name := safetext.Escape(l.path())
	what := safetext.Escape(why.Error())
	var err error
	switch {
	case st.raw != nil:
		err = f.replace(st.raw, st.mode, st.uid, st.gid, nil)
		if err == nil {
			return fmt.Sprintf("%s: this session made %s's trust file unreadable as one (%s); cco put back the file as it was at launch (the session's changes to it, a login refresh among them, are gone)", name, l.Agent, what)
		}
	case !st.existed:
		err = f.remove()
		if err == nil {
			return fmt.Sprintf("%s: this session made %s's trust file, unreadable as one (%s); cco removed it", name, l.Agent, what)
		}
	default:
		return fmt.Sprintf("%s: %s's trust file could not be read at launch nor after the session (%s); check it before you run %s again", name, l.Agent, what, l.Agent)
	}
	return fmt.Sprintf("%s: this session made %s's trust file unreadable as one (%s), and cco could not put it back (%v); fix: rm %s, then log in to %s again", name, l.Agent, what, safetext.Escape(err.Error()), name, l.Agent)
}

// parse reads JSON or JSONC (Copilot CLI's config.json opens with
// comments). An object with a member named twice is rewritten as standard
// JSON with the last one kept, as the agents' parsers keep it, so that the
// member put back is the one they read.
func parse(b []byte) (hujson.Value, error) {
	v, err := hujson.Parse(b)
	if err != nil {
		return v, err
	}
	if _, ok := v.Value.(*hujson.Object); !ok {
		return v, errors.New("not a JSON object")
	}
	if hasDuplicates(&v) {
		var x any
		std := v.Clone()
		std.Standardize()
		if err := json.Unmarshal(std.Pack(), &x); err != nil {
			return v, err
		}
		nb, err := json.MarshalIndent(x, "", "  ")
		if err != nil {
			return v, err
		}
		return hujson.Parse(nb)
	}
	return v, nil
}

func hasDuplicates(v *hujson.Value) bool {
	for x := range v.All() {
		if o, ok := x.Value.(*hujson.Object); ok {
			seen := map[string]bool{}
			for _, m := range o.Members {
				n := m.Name.Value.(hujson.Literal).String()
				if seen[n] {
					return true
				}
				seen[n] = true
			}
		}
	}
	return false
}

// values are the keys' values in v, by JSON pointer, as compact JSON.
func values(v hujson.Value, keys []string) map[string]string {
	std := v.Clone()
	std.Standardize()
	d := json.NewDecoder(bytes.NewReader(std.Pack()))
	d.UseNumber()
	var doc any
	out := map[string]string{}
	if d.Decode(&doc) != nil {
		return out
	}
	for _, k := range keys {
		walk(doc, strings.Split(k, "."), "", out)
	}
	return out
}

func walk(x any, path []string, ptr string, out map[string]string) {
	if len(path) == 0 {
		b, _ := json.Marshal(x)
		out[ptr] = string(b)
		return
	}
	o, ok := x.(map[string]any)
	if !ok {
		return
	}
	if path[0] != "*" {
		if c, ok := o[path[0]]; ok {
			walk(c, path[1:], ptr+"/"+escape(path[0]), out)
		}
		return
	}
	for n, c := range o {
		walk(c, path[1:], ptr+"/"+escape(n), out)
	}
}

func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

func unescape(s string) string { return strings.NewReplacer("~1", "/", "~0", "~").Replace(s) }

// intended are the values the keys are put back to: the launch's, but for
// what the session may write (List.Allow): a project entry named by an
// allowed folder keeps the session's value, and a list of folders keeps
// the launch's entries and the session's entries that name an allowed
// folder exactly.
func intended(before, now map[string]string, allow []string) map[string]string {
	out := map[string]string{}
	for p, v := range before {
		out[p] = v
	}
	for p, v := range now {
		elems := strings.Split(strings.TrimPrefix(p, "/"), "/")
		if len(elems) >= 3 && elems[0] == "projects" && slices.Contains(allow, unescape(elems[1])) {
			out[p] = v
			continue
		}
		var launch, session []any
		if json.Unmarshal([]byte(v), &session) != nil {
			continue
		}
		if b, had := before[p]; had && json.Unmarshal([]byte(b), &launch) != nil {
			continue
		}
		merged, added := launch, false
		for _, e := range session {
			if f, ok := e.(string); ok && slices.Contains(allow, f) && !slices.ContainsFunc(merged, func(x any) bool { return x == e }) {
				merged, added = append(merged, f), true
			}
		}
		if added {
			b, _ := json.Marshal(merged)
			out[p] = string(b)
		}
	}
	// A project entry of an allowed folder the session removed stays
	// removed.
	for p := range before {
		elems := strings.Split(strings.TrimPrefix(p, "/"), "/")
		if _, ok := now[p]; !ok && len(elems) >= 3 && elems[0] == "projects" && slices.Contains(allow, unescape(elems[1])) {
			delete(out, p)
		}
	}
	return out
}

// changedKeys are the pointers whose value differs between launch and now,
// sorted.
func changedKeys(before, now map[string]string) []string {
	var out []string
	for p, v := range now {
		if before[p] != v {
			out = append(out, p)
		}
	}
	for p := range before {
		if _, ok := now[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// describe names the changed keys and what the session set them to, short.
func describe(changed []string, now map[string]string) string {
	var parts []string
	for i, p := range changed {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("and %d more", len(changed)-i))
			break
		}
		v, ok := now[p]
		if !ok {
			v = "removed"
		} else if len(v) > 80 {
			v = v[:77] + "..."
		}
		parts = append(parts, safetext.Escape(pretty(p))+" = "+safetext.Escape(v))
	}
	return strings.Join(parts, ", ")
}

// pretty is a pointer as a dotted path, a member with a dot or a slash
// quoted: projects."/".hasTrustDialogAccepted.
func pretty(ptr string) string {
	var parts []string
	for _, e := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		e = unescape(e)
		if strings.ContainsAny(e, "./ \"") || e == "" {
			e = strconv.Quote(e)
		}
		parts = append(parts, e)
	}
	return strings.Join(parts, ".")
}

// patch puts each changed key of v back: the launch's value, or no member
// where there was none. A parent the session removed (a project's entry)
// is made again.
func patch(v *hujson.Value, before, now map[string]string) error {
	type op struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value,omitempty"`
	}
	var ops []op
	for _, p := range changedKeys(before, now) {
		old, had := before[p]
		switch {
		case !had:
			ops = append(ops, op{Op: "remove", Path: p})
		default:
			// Parents first: each missing one as an empty object.
			elems := strings.Split(strings.TrimPrefix(p, "/"), "/")
			for i := 1; i < len(elems); i++ {
				parent := "/" + strings.Join(elems[:i], "/")
				if v.Find(parent) == nil {
					if err := v.Patch(mustJSON([]op{{Op: "add", Path: parent, Value: json.RawMessage("{}")}})); err != nil {
						return err
					}
				} else if _, ok := v.Find(parent).Value.(*hujson.Object); !ok {
					if err := v.Patch(mustJSON([]op{{Op: "replace", Path: parent, Value: json.RawMessage("{}")}})); err != nil {
						return err
					}
				}
			}
			ops = append(ops, op{Op: "add", Path: p, Value: json.RawMessage(old)})
		}
	}
	if err := v.Patch(mustJSON(ops)); err != nil {
		return err
	}
	v.Format()
	return nil
}

func mustJSON(x any) []byte {
	b, err := json.Marshal(x)
	if err != nil {
		panic(err)
	}
	return b
}

// Files are the lists' absolute paths.
func Files(lists []List) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l.path())
	}
	return out
}
