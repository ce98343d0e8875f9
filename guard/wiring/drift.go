package wiring

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/rcfile"
)

// aheadDirs are system directories that come before guard.ShadowDir on Debian's
// and most distributions' default PATH.
var aheadDirs = []string{"/usr/local/sbin"}

// Drift finds what changed under cco since it installed the guard. A guard
// script may be missing, edited or loosened. A policy file cco wrote may be
// removed or edited. For each of users, a vendor-made claude or codex may
// run ahead of the shadow on PATH.
func Drift(root *provision.Root, rc *provision.Receipt, users []*provision.User) []provision.Finding {
	var out []provision.Finding
	for _, hook := range []string{guard.HookSessionStart, guard.HookPromptGate} {
		out = append(out, scriptDrift(root, rc, hook)...)
	}
	out = append(out, policyDrift(root, rc)...)
	for _, u := range users {
		out = append(out, pathDrift(root, u)...)
	}
	return out
}

// finding is one of the guard's drift findings: status lists them under
// the id "guard".
func finding(path, detail, fix string) provision.Finding {
	return provision.Finding{ID: "guard", Path: path, Detail: detail, Fix: fix}
}

func scriptDrift(root *provision.Root, rc *provision.Receipt, hook string) []provision.Finding {
	p := guard.ScriptPath(hook)
	// The owner cco gave it: root's, or the invoker's for an unprivileged
	// staging under --root. A status run by a user must not expect its own.
	wantUID := 0
	if e := rc.Paths[p]; e != nil {
		wantUID = e.UID
	} else if !root.IsHost() {
		wantUID = provision.SystemUID()
	}
	fix := "run `sudo cco-install` (with --force if the script was edited)"
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return []provision.Finding{finding(p, "the guard script is missing, so every "+hookUse(hook)+" fails closed", fix)}
	}
	if err != nil {
		return []provision.Finding{finding(p, err.Error(), fix)}
	}
	if !fi.Mode().IsRegular() {
		return []provision.Finding{finding(p, "the guard script is replaced by "+provision.DescribeForeign(&provision.Run{Root: root}, p, fi), fix)}
	}
	var out []provision.Finding
	if b, err := root.ReadFile(p); err != nil {
		out = append(out, finding(p, err.Error(), fix))
	} else if !bytes.Equal(b, guard.Script(hook)) {
		out = append(out, finding(p, "the guard script was changed since cco installed it", fix))
	}
	uid, _ := guard.Owner(fi)
	if fi.Mode().Perm() != 0o755 || uid != wantUID {
		out = append(out, finding(p, fmt.Sprintf("the guard script has mode %04o and owner uid %d, not 0755 and uid %d", fi.Mode().Perm(), uid, wantUID),
			fmt.Sprintf("chown %d %s && chmod 0755 %s", wantUID, p, p)))
	}
	return out
}

func hookUse(hook string) string {
	if hook == guard.HookPromptGate {
		return "prompt is blocked"
	}
	return "session start is unverified"
}

// policyDrift checks every policy file the receipt says cco wrote.
func policyDrift(root *provision.Root, rc *provision.Receipt) []provision.Finding {
	var targets []string
	for p, e := range rc.Paths {
		if e.Kind == provision.KindFile && strings.HasPrefix(e.Step, "policy.") {
			targets = append(targets, p)
		}
	}
	sort.Strings(targets)
	var out []provision.Finding
	for _, p := range targets {
		e := rc.Paths[p]
		fi, err := root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			out = append(out, finding(p, "the policy file cco wrote was removed, so the agent no longer runs the guard", "run `sudo cco-install`"))
		case err != nil:
			out = append(out, finding(p, err.Error(), "run `sudo cco-install status` as root"))
		case !fi.Mode().IsRegular():
			out = append(out, finding(p, "the policy file cco wrote is now "+provision.DescribeForeign(&provision.Run{Root: root}, p, fi), "run `sudo cco-install --force` (what is there is kept under "+provision.StateDir+"/backups)"))
		default:
			sum, err := provision.HashFile(root, p)
			if err != nil {
				out = append(out, finding(p, err.Error(), "run `sudo cco-install status` as root"))
			} else if sum != e.SHA256 {
				out = append(out, finding(p, "the policy file cco wrote was edited", "undo the edit, or run `sudo cco-install --force` (the edited file is kept under "+provision.StateDir+"/backups)"))
			}
		}
	}
	return out
}

// pathDrift finds a vendor-made agent that a user's PATH reaches before the
// shadow. The vendors' installers put their launchers in ~/.local/bin and
// prepend that directory in the shell rc files.
func pathDrift(root *provision.Root, u *provision.User) []provision.Finding {
	var out []provision.Finding
	prepends := prependingRC(root, u.Home)
	for _, p := range agent.All() {
		name := p.Name
		shadow := guard.ShadowDir + "/" + name
		var cands []string
		for _, d := range p.Installers.HomeBins {
			cands = append(cands, path.Join(u.Home, d, name))
		}
		for _, d := range aheadDirs {
			cands = append(cands, d+"/"+name)
		}
		for _, c := range cands {
			fi, err := root.Lstat(c)
			if err != nil {
				continue
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				if l, err := root.Readlink(c); err == nil && path.Clean(l) == shadow {
					continue // a link to the shadow is the shadow
				}
			}
			what := provision.DescribeForeign(&provision.Run{Root: root}, c, fi)
			msg := fmt.Sprintf("%s is %s: a %s that runs unwrapped, ahead of %s", c, what, name, shadow)
			if strings.HasPrefix(c, u.Home+"/") {
				msg = fmt.Sprintf("%s's %s", u.Name, msg)
				if len(prepends) > 0 {
					msg += " (" + strings.Join(prepends, ", ") + " put ~/.local/bin first on PATH)"
				}
			}
			out = append(out, finding(c, msg, fmt.Sprintf("remove %s; then `%s` runs cco's wrapper %s", c, name, shadow)))
		}
	}
	return out
}

// prependingRC names each rc file, with a line number, that puts
// ~/.local/bin before the rest of PATH. Debian's stock ~/.profile block
// counts: it is no vendor's, yet it is why ~/.local/bin comes first. Home
// directories belong to their users, so nothing there is followed through
// a symlink.
func prependingRC(root *provision.Root, home string) []string {
	var out []string
	for _, rel := range rcfile.Files {
		// A FIFO or a huge file there is refused unread (the take-over's
		// scan of the same files names it).
		b, err := provision.ReadCapped(root, path.Join(home, rel))
		if err != nil {
			continue
		}
		for _, blk := range rcfile.Find(b) {
			if blk.Line > 0 {
				out = append(out, fmt.Sprintf("~/%s line %d", filepath.ToSlash(rel), blk.Line))
				break
			}
		}
	}
	return out
}
