package sandbox

import (
	"bufio"
	"bytes"
	"path/filepath"
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
