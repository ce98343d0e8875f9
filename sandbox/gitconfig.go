package sandbox

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cco-dev/cco/sandbox/saferead"
)

// Gitconfig is the curated global git configuration of the jail: the host
// user's identity so that commits work, and no credential helper unless a
// forge is enabled in sandbox.toml (then only that forge's CLI, for that
// forge's host), and the host's URL rewrites and CA files
// (gitHostSettings). Nothing else of the host's configuration (aliases,
// includes, hooksPath, core.fsmonitor, ...) can run a command.
func Gitconfig(home string, forges []string) []byte {
	name, email := hostGitIdentity(home)
	var b bytes.Buffer
	b.WriteString("# Written by cco for this jail; the host's ~/.gitconfig is not visible.\n")
	if name != "" || email != "" {
		b.WriteString("[user]\n")
		if name != "" {
			b.WriteString("\tname = " + gitQuote(name) + "\n")
		}
		if email != "" {
			b.WriteString("\temail = " + gitQuote(email) + "\n")
		}
	}
	b.Write(gitHostSection(gitHostSettings(home)))
	hosts := map[string]string{"github": "https://github.com", "gitlab": "https://gitlab.com"}
	for _, f := range forges {
		if fg, ok := Forges[f]; ok {
			b.WriteString("[credential \"" + hosts[f] + "\"]\n\thelper = " + gitQuote(fg.Helper) + "\n")
		}
	}
	return b.Bytes()
}

// hostGitIdentity is the user's user.name and user.email, from
// ~/.config/git/config and then ~/.gitconfig (the later wins, as in git).
func hostGitIdentity(home string) (name, email string) {
	for _, f := range []string{filepath.Join(home, ".config/git/config"), filepath.Join(home, ".gitconfig")} {
		n, e := gitIdentity(f)
		if n != "" {
			name = n
		}
		if e != "" {
			email = e
		}
	}
	return name, email
}

// gitIdentity reads user.name and user.email from one git config file: only
// the [user] section, no includes (they could name anything). A link is
// followed (dotfile managers link ~/.gitconfig), but what it names is read
// through saferead.ReadCapped: a FIFO or device never holds the launch.
func gitIdentity(path string) (name, email string) {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		path = r
	}
	data, err := saferead.ReadCapped(path)
	if err != nil {
		return "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	inUser := false
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		if l[0] == '[' {
			sec := strings.ToLower(strings.TrimSpace(strings.Trim(l[:strings.IndexByte(l+"]", ']')], "[")))
			inUser = sec == "user"
			continue
		}
		if !inUser {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		v = gitUnquote(strings.TrimSpace(v))
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "name":
			name = v
		case "email":
			email = v
		}
	}
	return name, email
}

func gitUnquote(v string) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
		v = strings.ReplaceAll(v, `\"`, `"`)
		v = strings.ReplaceAll(v, `\\`, `\`)
	}
	return v
}

func gitQuote(v string) string {
	v = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == 0 {
			return -1
		}
		return r
	}, v)
	v = strings.ReplaceAll(v, `\`, `\\`)
	v = strings.ReplaceAll(v, `"`, `\"`)
	return `"` + v + `"`
}

// gitExcludesRel is where the jail's git finds its excludes file: in the
// jail's own home, which nothing of the host's holds.
const gitExcludesRel = ".config/cco/git-excludes"

// gitExcludes is the jail's excludes file: the user's own (core.excludesFile
// of ~/.gitconfig or ~/.config/git/config, else git's default
// ~/.config/git/ignore), then one anchored pattern for each name the jail
// shows in a repository of the workspace that the session did not write
// (a read-only stand-in, a scratch directory), relative to the top of the
// repository that holds it, or of the workspace ws where none does (a git
// init there in the session then excludes them too). The repository's own
// files (.gitignore, .git/info/exclude) are never changed for it. "" when
// there is nothing to exclude.
func gitExcludes(home, ws string, shown []shownName) string {
	var b strings.Builder
	if own := userExcludes(home); own != "" {
		b.WriteString(own)
		if !strings.HasSuffix(own, "\n") {
			b.WriteString("\n")
		}
	}
	var pats []string
	for _, n := range shown {
		top := repoTop(filepath.Dir(n.path))
		if top == "" {
			top = ws
		}
		if top == "" {
			continue
		}
		rel, err := filepath.Rel(top, n.path)
		if err != nil || strings.HasPrefix(rel, "..") || slices.Contains(strings.Split(rel, "/"), ".git") {
			continue // git never lists what is in a git directory
		}
		p := "/" + gitEscape(filepath.ToSlash(rel))
		if n.dir {
			p += "/"
		}
		if !slices.Contains(pats, p) {
			pats = append(pats, p)
		}
	}
	if len(pats) > 0 {
		b.WriteString("# What cco's jail shows that no session wrote (stand-ins, scratch directories).\n")
		for _, p := range pats {
			b.WriteString(p + "\n")
		}
	}
	return b.String()
}

// shownName is a name the jail shows in the workspace that the session did
// not write.
type shownName struct {
	path string
	dir  bool
}

// repoTop is the nearest directory from d up that holds a .git entry, or
// "".
func repoTop(d string) string {
	for {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// gitEscape escapes what gitignore's patterns treat as special.
func gitEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\*?[!# `, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// userExcludes is the content of the user's own global excludes file, read
// through saferead.ReadCapped (a link is followed, as git does).
func userExcludes(home string) string {
	p := ""
	for _, f := range []string{filepath.Join(home, ".config/git/config"), filepath.Join(home, ".gitconfig")} {
		if v := gitCoreExcludes(f); v != "" {
			p = v
		}
	}
	switch {
	case p == "":
		p = filepath.Join(home, ".config/git/ignore")
	case strings.HasPrefix(p, "~/"):
		p = filepath.Join(home, p[2:])
	case !filepath.IsAbs(p):
		return ""
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	b, err := saferead.ReadCapped(p)
	if err != nil {
		return ""
	}
	return string(b)
}

// gitCoreExcludes reads core.excludesFile from one git config file: only
// the [core] section, no includes.
func gitCoreExcludes(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		path = r
	}
	data, err := saferead.ReadCapped(path)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	inCore, v := false, ""
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		if l[0] == '[' {
			inCore = strings.ToLower(strings.TrimSpace(strings.Trim(l[:strings.IndexByte(l+"]", ']')], "["))) == "core"
			continue
		}
		if k, val, ok := strings.Cut(l, "="); ok && inCore && strings.EqualFold(strings.TrimSpace(k), "excludesfile") {
			v = gitUnquote(strings.TrimSpace(val))
		}
	}
	return v
}

// withExcludes names the jail's excludes file in its gitconfig.
func withExcludes(gitconfig []byte, path string) []byte {
	return append(gitconfig, []byte("[core]\n\texcludesFile = "+gitQuote(path)+"\n")...)
}
