package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

func markerJSON(m *Marker) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding the jail marker: %w", err)
	}
	return b, nil
}

// registryDir holds one record per running launch: what it created on the
// host, so that the next launch can remove what a SIGKILL left behind.
func registryDir(home string) string {
	return filepath.Join(home, ".local/state/cco/mounts")
}

// record is one launch's host-side leftovers.
type record struct {
	PID          int           `json:"pid"`
	Start        string        `json:"start"`
	Runtime      string        `json:"runtime"`
	Placeholders []placeholder `json:"placeholders,omitempty"`
}

type placeholder struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir,omitempty"`
	Dev  uint64 `json:"dev,omitempty"`
	Ino  uint64 `json:"ino,omitempty"`
}

// Session is the host-side state of one launch, undone by Finish.
type Session struct {
	home    string
	rec     record
	recPath string
	watched map[string]map[string]string
}

// Prepare does the host-side work of a Prep before bwrap starts: it removes
// what dead launches left behind, writes the runtime files, creates the
// login directories, carries state files over, creates and records the
// placeholders, and snapshots the watched state files.
func Prepare(home, runtime string, pr *Prep) (*Session, error) {
	CleanStale(home)
	s := &Session{home: home}
	s.rec = record{PID: os.Getpid(), Start: procStart(os.Getpid()), Runtime: runtime}
	for _, f := range pr.Files {
		p := filepath.Join(runtime, f.Name)
		if f.Mode.IsDir() {
			if err := os.Mkdir(p, f.Mode.Perm()); err != nil {
				return nil, fmt.Errorf("creating %s: %w", p, err)
			}
			continue
		}
		if err := os.WriteFile(p, f.Data, f.Mode.Perm()); err != nil {
			return nil, fmt.Errorf("writing %s: %w", p, err)
		}
	}
	for _, d := range pr.LoginDirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating the login directory %s: %w", d, err)
		}
	}
	for _, c := range pr.CarryOver {
		if err := carryOver(c[0], c[1]); err != nil {
			return nil, err
		}
	}
	dir := registryDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	s.recPath = filepath.Join(dir, strconv.Itoa(s.rec.PID)+".json")
	for _, ph := range pr.Placeholders {
		s.rec.Placeholders = append(s.rec.Placeholders, placeholder{Path: ph.Path, Dir: ph.Dir})
	}
	// The record goes first: a crash between it and the placeholders
	// leaves nothing unrecorded.
	if err := s.writeRecord(); err != nil {
		return nil, err
	}
	if len(pr.Placeholders) > 0 {
		for i := range s.rec.Placeholders {
			ph := &s.rec.Placeholders[i]
			if err := createPlaceholder(ph); err != nil {
				s.Finish()
				return nil, err
			}
		}
		if err := s.writeRecord(); err != nil {
			s.Finish()
			return nil, err
		}
	}
	if len(pr.Watched) > 0 {
		s.watched = map[string]map[string]string{}
		for _, w := range pr.Watched {
			s.watched[w] = CommandEntries(w)
		}
	}
	return s, nil
}

func (s *Session) writeRecord() error {
	b, _ := json.Marshal(&s.rec)
	if err := os.WriteFile(s.recPath, b, 0o600); err != nil {
		return fmt.Errorf("recording this launch in %s: %w", s.recPath, err)
	}
	return nil
}

// Finish removes this launch's placeholders, runtime directory and record.
func (s *Session) Finish() {
	undo(&s.rec)
	os.Remove(s.recPath)
}

// Added lists the command-bearing entries the session added or changed in
// the watched state files, one line each.
func (s *Session) Added() []string {
	var out []string
	for path, before := range s.watched {
		after := CommandEntries(path)
		for k, v := range after {
			if before[k] != v {
				scope, name, _ := strings.Cut(k, "\x00")
				out = append(out, fmt.Sprintf("%s: mcpServers %q (%s) runs %s", path, name, scope, v))
			}
		}
	}
	return out
}

func undo(r *record) {
	for i := len(r.Placeholders) - 1; i >= 0; i-- {
		ph := r.Placeholders[i]
		fi, err := os.Lstat(ph.Path)
		if err != nil {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || ph.Ino == 0 || uint64(st.Dev) != ph.Dev || st.Ino != ph.Ino {
			continue // not the one we made: leave it alone
		}
		// Remove only while still empty: never delete what someone wrote.
		if ph.Dir {
			os.Remove(ph.Path) // fails unless empty
		} else if fi.Mode().IsRegular() && fi.Size() == 0 {
			os.Remove(ph.Path)
		}
	}
	if r.Runtime != "" && strings.Contains(filepath.Base(r.Runtime), "cco-jail-") {
		os.RemoveAll(r.Runtime)
	}
}

func createPlaceholder(ph *placeholder) error {
	var err error
	if ph.Dir {
		err = os.Mkdir(ph.Path, 0o700)
	} else {
		var f *os.File
		f, err = os.OpenFile(ph.Path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			f.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("creating the mount point %s: %w", ph.Path, err)
	}
	fi, err := os.Lstat(ph.Path)
	if err != nil {
		return fmt.Errorf("checking the mount point %s: %w", ph.Path, err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	ph.Dev, ph.Ino = uint64(st.Dev), st.Ino
	return nil
}

// CleanStale undoes the records of launches whose process is gone (a
// SIGKILL leaves its placeholders and runtime directory behind).
func CleanStale(home string) {
	dir := registryDir(home)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var r record
		if json.Unmarshal(b, &r) != nil {
			os.Remove(p)
			continue
		}
		if r.PID > 0 && procStart(r.PID) == r.Start && r.Start != "" {
			continue // still running
		}
		undo(&r)
		os.Remove(p)
	}
}

// procStart is a process's start time (field 22 of /proc/PID/stat), which
// tells a live launch from a recycled pid.
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// carryOver copies from to to once, as the invoking user, keeping from.
func carryOver(from, to string) error {
	if _, err := os.Lstat(to); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	src, err := os.Open(from)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("carrying %s over: %w", from, err)
	}
	defer src.Close()
	if fi, err := src.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("carrying %s over to %s: %w", from, to, err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		os.Remove(to)
		return fmt.Errorf("carrying %s over to %s: %w", from, to, err)
	}
	return dst.Close()
}

// CommandEntries reads the command-bearing entries of a claude state file:
// every mcpServers entry with a command, at the top level and per project,
// keyed by scope and name, valued by the entry's JSON.
func CommandEntries(path string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	var st struct {
		MCP      map[string]json.RawMessage `json:"mcpServers"`
		Projects map[string]struct {
			MCP map[string]json.RawMessage `json:"mcpServers"`
		} `json:"projects"`
	}
	if json.Unmarshal(b, &st) != nil {
		return out
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
	return out
}
