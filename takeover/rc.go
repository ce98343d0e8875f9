package takeover

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/provision"
)

// RCFiles are the shell start-up files the vendors' installers append their
// PATH blocks to, relative to a home.
var RCFiles = []string{".bashrc", ".bash_profile", ".profile", ".zshrc", ".zprofile", ".zshenv", ".config/fish/config.fish"}

const (
	codexBegin = "# >>> Codex installer >>>"
	codexEnd   = "# <<< Codex installer <<<"
)

// localBinPath matches a line that puts ~/.local/bin on PATH.
var localBinPath = regexp.MustCompile(`(?i)(PATH|fish_add_path).*(\$HOME|\$\{HOME\}|~)/\.local/bin`)

// Block is one vendor PATH block in a shell start-up file.
type Block struct {
	User      string
	File      string // target path
	rel       string
	From, To  int // 1-based line numbers, inclusive
	Vendor    string
	Removable bool // unambiguously the vendor's: --fix-rc removes it
}

func (b Block) String() string {
	s := fmt.Sprintf("%s lines %d-%d: %s's PATH block puts ~/.local/bin ahead of /usr/local/bin", b.File, b.From, b.To, b.Vendor)
	if !b.Removable {
		s = fmt.Sprintf("%s line %d puts ~/.local/bin ahead of /usr/local/bin (not marked as a vendor's: edit it by hand if a vendor's agent there wins over the shadow)", b.File, b.From)
	}
	return s
}

// FindBlocks reads rc text and returns the vendor PATH blocks in it.
// Codex marks its block; Claude's is a ~/.local/bin PATH line right after a
// comment that names Claude. Other ~/.local/bin lines are reported, never
// removed: they may be the user's own.
func FindBlocks(text []byte) []Block {
	lines := strings.Split(string(text), "\n")
	var out []Block
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == codexBegin:
			end := i
			for j := i + 1; j < len(lines); j++ {
				if strings.TrimSpace(lines[j]) == codexEnd {
					end = j
					break
				}
			}
			if end == i {
				out = append(out, Block{From: i + 1, To: i + 1, Vendor: "Codex (unterminated)", Removable: false})
				continue
			}
			out = append(out, Block{From: i + 1, To: end + 1, Vendor: "Codex", Removable: true})
			i = end
		case strings.HasPrefix(l, "#") && pathComment(l) != "" && i+1 < len(lines) && localBinPath.MatchString(lines[i+1]):
			out = append(out, Block{From: i + 1, To: i + 2, Vendor: pathComment(l), Removable: true})
			i++
		case !strings.HasPrefix(l, "#") && localBinPath.MatchString(l):
			out = append(out, Block{From: i + 1, To: i + 1, Vendor: "unknown"})
		}
	}
	return out
}

// pathComment names the vendor whose installer's comment line l is (a
// profile's PathComment in it), or "".
func pathComment(l string) string {
	l = strings.ToLower(l)
	for _, p := range agent.All() {
		if p.PathComment != "" && strings.Contains(l, p.PathComment) {
			return p.PathVendor
		}
	}
	return ""
}

// removeBlocks drops the removable blocks' lines from text.
func removeBlocks(text []byte, blocks []Block) []byte {
	lines := strings.Split(string(text), "\n")
	drop := map[int]bool{}
	for _, b := range blocks {
		if b.Removable {
			for n := b.From; n <= b.To; n++ {
				drop[n-1] = true
			}
		}
	}
	var out []string
	for i, l := range lines {
		if !drop[i] {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// RCStep reports the vendors' PATH blocks and, with FixRC, removes them
// (keeping a backup under /var/lib/cco/backups).
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
		for _, rel := range RCFiles {
			b, err := h.ReadFile(rel)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("%s: %v", h.Path(rel), err))
				continue
			}
			if !bytes.Contains(b, []byte(".local/bin")) {
				continue
			}
			for _, blk := range FindBlocks(b) {
				blk.User, blk.File, blk.rel = u.Name, h.Path(rel), rel
				blocks = append(blocks, blk)
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
					err = h.WriteFile(bs[0].rel, removeBlocks(text, FindBlocks(text)), fi.Mode().Perm())
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

// RCSteps is the takeover.rc step when some home has a ~/.local/bin PATH
// line to report (or, with fix, to remove); otherwise nothing.
func RCSteps(run *provision.View, users []string, fix bool) []provision.Step {
	s := &RCStep{Users: users, FixRC: fix}
	if blocks, warnings := s.scan(run); len(blocks) == 0 && len(warnings) == 0 {
		return nil
	}
	return []provision.Step{s}
}
