package takeover

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/rcfile"
)

// Block is one PATH block of a shell start-up file in a user's home.
type Block struct {
	rcfile.Block
	User string
	File string // target path
	rel  string
}

func (b Block) String() string {
	s := fmt.Sprintf("%s lines %d-%d: %s's PATH block puts ~/.local/bin ahead of /usr/local/bin", b.File, b.From, b.To, b.Vendor)
	if !b.Removable {
		s = fmt.Sprintf("%s line %d puts ~/.local/bin ahead of /usr/local/bin (not marked as a vendor's: edit it by hand if a vendor's agent there wins over the shadow)", b.File, b.From)
	}
	return s
}

// RCStep reports the vendors' PATH blocks. With FixRC it removes them and
// keeps a backup under /var/lib/cco/backups.
type RCStep struct {
	Users []string
	FixRC bool
}

func (s *RCStep) ID() string   { return "takeover.rc" }
func (s *RCStep) Name() string { return "the vendors' PATH blocks in shell start-up files" }

func (s *RCStep) scan(run *provision.View) ([]Block, []string) {
	var blocks []Block
	var warnings []string
	st := &Step{cfg: Config{Users: s.Users}}
	for _, u := range st.users(run) {
		h, err := run.Root.OpenHome(u)
		if err != nil {
			continue
		}
		for _, rel := range rcfile.Files {
			b, err := h.ReadFile(rel)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				if w := provision.HomeProblem(h.Path(rel), err); w != "" {
					warnings = append(warnings, w)
				}
				continue
			}
			for _, blk := range rcfile.Find(b) {
				if !blk.Stock() {
					blocks = append(blocks, Block{Block: blk, User: u.Name, File: h.Path(rel), rel: rel})
				}
			}
		}
		h.Close()
	}
	return blocks, warnings
}

func (s *RCStep) Check(run *provision.View) (provision.Check, error) {
	blocks, warnings := s.scan(run)
	c := provision.Check{Warnings: warnings, Data: blocks}
	removable := 0
	for _, b := range blocks {
		c.Paths = append(c.Paths, b.File)
		if b.Removable && s.FixRC {
			removable++
			continue
		}
		hint := ""
		if b.Removable {
			hint = " (--fix-rc removes it, keeping a backup)"
		}
		c.Warnings = append(c.Warnings, b.String()+hint)
	}
	if removable == 0 {
		c.State, c.Detail = provision.Done, fmt.Sprintf("%d vendor PATH blocks found", len(blocks))
		return c, nil
	}
	c.State, c.Detail = provision.ToDo, fmt.Sprintf("remove %d vendor PATH blocks", removable)
	return c, nil
}

func (s *RCStep) Apply(run *provision.Run, c provision.Check) (string, error) {
	blocks, _ := c.Data.([]Block)
	byFile := map[string][]Block{}
	var order []string
	for _, b := range blocks {
		if !b.Removable {
			continue
		}
		if _, ok := byFile[b.File]; !ok {
			order = append(order, b.File)
		}
		byFile[b.File] = append(byFile[b.File], b)
	}
	var done []string
	for _, file := range order {
		bs := byFile[file]
		u, err := provision.LookupUser(run.Root, bs[0].User)
		if err != nil {
			return strings.Join(done, "; "), err
		}
		h, err := run.Root.OpenHome(u)
		if err != nil {
			return strings.Join(done, "; "), err
		}
		text, err := h.ReadFile(bs[0].rel)
		if err == nil {
			var fi fs.FileInfo
			if fi, err = h.Lstat(bs[0].rel); err == nil {
				backup := run.BackupDir() + file
				if err = run.MkdirAll(path.Dir(backup), 0o700, "backups"); err == nil {
					err = run.Root.WriteFile(backup, bytes.NewReader(text), 0o600, provision.SystemUID(), provision.SystemGID())
				}
				if err == nil {
					err = h.WriteFile(bs[0].rel, rcfile.Remove(text, rcfile.Find(text)), fi.Mode().Perm())
					done = append(done, fmt.Sprintf("removed %d PATH blocks from %s (backup: %s)", len(bs), file, backup))
				}
			}
		}
		h.Close()
		if err != nil {
			return strings.Join(done, "; "), err
		}
	}
	return strings.Join(done, "; "), nil
}

// RCSteps is the takeover.rc step when some home has a vendor's PATH block,
// or an unmarked ~/.local/bin PATH line, to report or, with fix, to remove.
// It is nothing otherwise. Debian's stock ~/.profile block is no vendor's
// and never makes the step.
func RCSteps(run *provision.View, users []string, fix bool) []provision.Step {
	s := &RCStep{Users: users, FixRC: fix}
	if blocks, warnings := s.scan(run); len(blocks) == 0 && len(warnings) == 0 {
		return nil
	}
	return []provision.Step{s}
}
