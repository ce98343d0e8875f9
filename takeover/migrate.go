package takeover

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/cco-dev/cco/managed"
	"github.com/cco-dev/cco/provision"
)

// The bash claude-sandbox that cco replaces left these behind. They are taken
// over (moved to /var/lib/cco/relocated, recorded with what they were), not
// reported as foreign: its shadow would otherwise win /usr/local/bin/claude,
// and its hooks would point at scripts cco removes.
const (
	bashTree             = "/usr/libexec/claude-sandbox"
	bashSandboxSignature = "claude-sandbox"
)

// IsBashSandboxShadow reports whether the file at p is the bash
// claude-sandbox's shadow script.
func IsBashSandboxShadow(root provision.FileReader, p string) bool {
	return mentions(root, p, 64<<10, "#!")
}

// mentions reports whether the first limit bytes of p name claude-sandbox
// (and start with prefix, when given).
func mentions(root provision.FileReader, p string, limit int64, prefix string) bool {
	f, err := root.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, limit))
	return bytes.HasPrefix(b, []byte(prefix)) && bytes.Contains(b, []byte(bashSandboxSignature))
}

// Migration takes over the bash claude-sandbox's tree and policy files.
type Migration struct{}

func (Migration) ID() string   { return "takeover.claude-sandbox" }
func (Migration) Name() string { return "take over what the bash claude-sandbox installed" }

type leftover struct{ path, kind, what string }

func (Migration) leftovers(run *provision.View) []leftover {
	var out []leftover
	if fi, err := run.Root.Lstat(bashTree); err == nil && fi.IsDir() {
		out = append(out, leftover{bashTree, provision.KindDir, "the bash claude-sandbox's scripts"})
	}
	// The policy files it wrote are the ones cco's own handlers write now.
	for _, p := range []string{managed.ClaudeBasePath, managed.CodexRequirementsPath} {
		if _, ours := run.Receipt.Paths[p]; ours {
			continue
		}
		if fi, err := run.Root.Lstat(p); err == nil && fi.Mode().IsRegular() && mentions(run.Root, p, 1<<20, "") {
			out = append(out, leftover{p, provision.KindFile, "the bash claude-sandbox's policy (it names " + bashTree + ")"})
		}
	}
	return out
}

func (m Migration) Check(run *provision.View) (provision.Check, error) {
	found := m.leftovers(run)
	c := provision.Check{Data: found}
	if len(found) == 0 {
		c.State, c.Detail = provision.Done, "no bash claude-sandbox here"
		return c, nil
	}
	var parts []string
	for _, l := range found {
		c.Paths = append(c.Paths, l.path)
		parts = append(parts, fmt.Sprintf("take over %s (%s)", l.path, l.what))
	}
	c.State, c.Detail = provision.ToDo, strings.Join(parts, "; ")
	return c, nil
}

func (m Migration) Apply(run *provision.Run, c provision.Check) (string, error) {
	found, _ := c.Data.([]leftover)
	var done []string
	for _, l := range found {
		dst := RelocatedDir + l.path
		if _, err := run.Root.Lstat(dst); err == nil {
			return strings.Join(done, "; "), fmt.Errorf("%s already holds a relocated copy: move it away by hand, then run again", dst)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return strings.Join(done, "; "), err
		}
		if err := run.MkdirAll(path.Dir(dst), 0o700, m.ID()); err != nil {
			return strings.Join(done, "; "), err
		}
		setRelocation(run.Receipt, provision.Relocation{From: l.path, To: dst, Step: m.ID(), Kind: l.kind, What: l.what})
		if err := run.SaveReceipt(); err != nil {
			return strings.Join(done, "; "), err
		}
		if err := run.Root.Rename(l.path, dst); err != nil {
			dropRelocation(run.Receipt, l.path)
			run.SaveReceipt()
			return strings.Join(done, "; "), err
		}
		done = append(done, fmt.Sprintf("took over %s (%s): kept at %s", l.path, l.what, dst))
	}
	return strings.Join(done, "; "), nil
}
