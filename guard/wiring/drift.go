package wiring

import (
	"bufio"
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
)

// Finding is one thing `cco-install status` reports as drifted.
type Finding struct {
	Path    string
	Message string
	Fix     string
}

// aheadDirs are system directories that come before guard.ShadowDir on Debian's
// and most distributions' default PATH.
var aheadDirs = []string{"/usr/local/sbin"}

// rcFiles are the shell start-up files in which the vendors' installers
// prepend ~/.local/bin to PATH.
var rcFiles = []string{".profile", ".bashrc", ".bash_profile", ".zshrc", ".zprofile", ".zshenv", ".config/fish/config.fish"}

// Drift finds what changed under cco since it installed the guard: a guard
// script missing, edited or loosened; a policy file cco wrote that is now
// removed or edited; and, for each of users, a vendor-made claude or codex
// that runs ahead of the shadow on PATH.
func Drift(root *provision.Root, rc *provision.Receipt, users []*provision.User) []Finding {
	var out []Finding
	for _, hook := range []string{guard.HookSessionStart, guard.HookPromptGate} {
		out = append(out, scriptDrift(root, rc, hook)...)
	}
	out = append(out, policyDrift(root, rc)...)
	for _, u := range users {
		out = append(out, pathDrift(root, u)...)
	}
	return out
}

func scriptDrift(root *provision.Root, rc *provision.Receipt, hook string) []Finding {
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
		return []Finding{{p, "the guard script is missing, so every " + hookUse(hook) + " fails closed", fix}}
	}
	if err != nil {
		return []Finding{{p, err.Error(), fix}}
	}
	if !fi.Mode().IsRegular() {
		return []Finding{{p, "the guard script is replaced by " + provision.DescribeForeign(&provision.Run{Root: root}, p, fi), fix}}
	}
	var out []Finding
	if b, err := root.ReadFile(p); err != nil {
		out = append(out, Finding{p, err.Error(), fix})
	} else if !bytes.Equal(b, guard.Script(hook)) {
		out = append(out, Finding{p, "the guard script was changed since cco installed it", fix})
	}
	uid, _ := guard.Owner(fi)
	if fi.Mode().Perm() != 0o755 || uid != wantUID {
		out = append(out, Finding{p, fmt.Sprintf("the guard script has mode %04o and owner uid %d, not 0755 and uid %d", fi.Mode().Perm(), uid, wantUID),
			fmt.Sprintf("chown %d %s && chmod 0755 %s", wantUID, p, p)})
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
func policyDrift(root *provision.Root, rc *provision.Receipt) []Finding {
	var targets []string
	for p, e := range rc.Paths {
		if e.Kind == provision.KindFile && strings.HasPrefix(e.Step, "policy.") {
			targets = append(targets, p)
		}
	}
	sort.Strings(targets)
	var out []Finding
	for _, p := range targets {
		e := rc.Paths[p]
		fi, err := root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			out = append(out, Finding{p, "the policy file cco wrote was removed, so the agent no longer runs the guard", "run `sudo cco-install`"})
		case err != nil:
			out = append(out, Finding{p, err.Error(), "run `sudo cco-install status` as root"})
		case !fi.Mode().IsRegular():
			out = append(out, Finding{p, "the policy file cco wrote is now " + provision.DescribeForeign(&provision.Run{Root: root}, p, fi), "run `sudo cco-install --force` (what is there is kept under " + provision.StateDir + "/backups)"})
		default:
			sum, err := provision.HashFile(root, p)
			if err != nil {
				out = append(out, Finding{p, err.Error(), "run `sudo cco-install status` as root"})
			} else if sum != e.SHA256 {
				out = append(out, Finding{p, "the policy file cco wrote was edited", "undo the edit, or run `sudo cco-install --force` (the edited file is kept under " + provision.StateDir + "/backups)"})
			}
		}
	}
	return out
}

// pathDrift finds a vendor-made agent that a user's PATH reaches before the
// shadow: the vendors' installers put their launchers in ~/.local/bin and
// prepend that directory in the shell rc files.
func pathDrift(root *provision.Root, u *provision.User) []Finding {
	var out []Finding
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
			out = append(out, Finding{c, msg, fmt.Sprintf("remove %s; then `%s` runs cco's wrapper %s", c, name, shadow)})
		}
	}
	return out
}

// prependingRC lists the rc files (with line numbers) that put ~/.local/bin
// before the rest of PATH. Home directories belong to their users, so
// nothing there is followed through a symlink.
func prependingRC(root *provision.Root, home string) []string {
	var out []string
	for _, rel := range rcFiles {
		p := path.Join(home, rel)
		f, err := root.OpenNoFollow(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			if prependsLocalBin(sc.Text()) {
				out = append(out, fmt.Sprintf("~/%s line %d", filepath.ToSlash(rel), n))
				break
			}
		}
		f.Close()
	}
	return out
}

func prependsLocalBin(line string) bool {
	l := strings.TrimSpace(line)
	if strings.HasPrefix(l, "#") || !strings.Contains(l, ".local/bin") {
		return false
	}
	if strings.Contains(l, "fish_add_path") {
		return !strings.Contains(l, "--append") && !strings.Contains(l, "-a ")
	}
	i := strings.Index(l, "PATH=")
	if i < 0 {
		return false
	}
	v := strings.Trim(l[i+len("PATH="):], `"'`)
	lb := strings.Index(v, ".local/bin")
	pv := strings.Index(v, "$PATH")
	if pv < 0 {
		pv = strings.Index(v, "${PATH}")
	}
	return pv < 0 || lb < pv
}
