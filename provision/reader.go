package provision

import (
	"context"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/cco-dev/cco/internal/safetext"
)

// FileReader reads a target tree and never writes it. *Root is one; so is
// the read-only view a Check gets.
type FileReader interface {
	Dir() string
	IsHost() bool
	HostPath(target string) string
	Lstat(target string) (fs.FileInfo, error)
	Open(target string) (*os.File, error)
	OpenNoFollow(target string) (*os.File, error)
	ReadFile(target string) ([]byte, error)
	Readlink(target string) (string, error)
}

// Reader is what a Check sees of the target system: reads only, homes
// included. It has no write method, so "Check never writes" is checked by
// the compiler, and status and --dry-run, which run Checks alone, cannot
// change the system.
type Reader interface {
	FileReader
	OpenHome(u *User) (*HomeView, error)
}

// readOnly is a Root seen through Reader. It is a distinct type, so a
// Check cannot assert its way back to the Root's write methods.
type readOnly struct{ r *Root }

// ReadOnly is the root's read-only view.
func (r *Root) ReadOnly() Reader { return readOnly{r} }

func (v readOnly) Dir() string                                  { return v.r.Dir() }
func (v readOnly) IsHost() bool                                 { return v.r.IsHost() }
func (v readOnly) HostPath(target string) string                { return v.r.HostPath(target) }
func (v readOnly) Lstat(target string) (fs.FileInfo, error)     { return v.r.Lstat(target) }
func (v readOnly) Open(target string) (*os.File, error)         { return v.r.Open(target) }
func (v readOnly) OpenNoFollow(target string) (*os.File, error) { return v.r.OpenNoFollow(target) }
func (v readOnly) ReadFile(target string) ([]byte, error)       { return v.r.ReadFile(target) }
func (v readOnly) Readlink(target string) (string, error)       { return v.r.Readlink(target) }

func (v readOnly) OpenHome(u *User) (*HomeView, error) {
	h, err := v.r.OpenHome(u)
	if err != nil {
		return nil, err
	}
	return h.View(), nil
}

// HomeView is a user's home opened for reading only (see Home).
type HomeView struct {
	User *User
	h    *Home
}

// View is the home's read-only face, for helpers that Check and Apply share.
func (h *Home) View() *HomeView { return &HomeView{User: h.User, h: h} }

// Close releases the home's descriptor.
func (v *HomeView) Close() error { return v.h.Close() }

// Path names rel (relative to the home) as a target-system path.
func (v *HomeView) Path(rel string) string { return v.h.Path(rel) }

// Lstat describes rel without following it.
func (v *HomeView) Lstat(rel string) (fs.FileInfo, error) { return v.h.Lstat(rel) }

// Readlink reads the symlink rel.
func (v *HomeView) Readlink(rel string) (string, error) { return v.h.Readlink(rel) }

// ReadFile reads rel; no symlink is followed, not even the last.
func (v *HomeView) ReadFile(rel string) ([]byte, error) { return v.h.ReadFile(rel) }

// OpenNoFollow opens rel for reading; no symlink is followed.
func (v *HomeView) OpenNoFollow(rel string) (*os.File, error) { return v.h.OpenNoFollow(rel) }

// View is what a step's Check gets: the target read-only, the receipt (whose
// stat stamps a Check may refresh; only an apply saves them) and the run's
// switches.
type View struct {
	Ctx     context.Context
	Root    Reader
	Receipt *Receipt
	DryRun  bool
	Force   bool
	Diff    bool
	// Status marks a health check (`cco-install status`): a Check reports
	// what is installed and resolves nothing it would have to download.
	Status bool
	// Log receives progress lines for people (stderr, never stdout).
	Log io.Writer
	// Now is the clock, for backup names.
	Now func() time.Time
}

// Logf writes a progress line for people, through the one printer: the
// values it names (paths in homes, users' names) stay on the line.
func (v *View) Logf(format string, args ...any) {
	if v.Log != nil {
		safetext.Linef(v.Log, format, args...)
	}
}

// ReadOnly is the view a Check gets of this run.
func (run *Run) ReadOnly() *View {
	if run.View.Root == nil && run.Root != nil {
		run.View.Root = run.Root.ReadOnly()
	}
	if run.View.Now == nil {
		run.View.Now = time.Now
	}
	return &run.View
}
