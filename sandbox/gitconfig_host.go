package sandbox

import (
	"bufio"
	"bytes"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cco-dev/cco/sandbox/saferead"
)

// gitHostSetting is one host git setting the jail's gitconfig carries:
// section, subsection ("" for none), key as git spells it, value.
type gitHostSetting struct {
	section, sub, key, value string
}

// gitCarried are the host settings carried into the jail's gitconfig, by
// section and lower-cased key: the URL rewrites (an internal mirror in
// place of a public forge) and the CA file git checks servers against,
// global and per URL. None of them runs a command; credential helpers,
// aliases, includes and every command-bearing key stay behind.
var gitCarried = map[string]map[string]string{
	"url":  {"insteadof": "insteadOf", "pushinsteadof": "pushInsteadOf"},
	"http": {"sslcainfo": "sslCAInfo"},
}

// gitHostSettings reads the carried settings from the user's global git
// configuration (~/.config/git/config, then ~/.gitconfig, as git reads
// them; no includes), in order. A url rewrite needs its base (a
// subsection); a "~/" path is the home's.
func gitHostSettings(home string) []gitHostSetting {
	var out []gitHostSetting
	for _, f := range []string{filepath.Join(home, ".config/git/config"), filepath.Join(home, ".gitconfig")} {
		out = append(out, gitFileSettings(f, home)...)
	}
	return out
}

func gitFileSettings(path, home string) []gitHostSetting {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		path = r
	}
	data, err := saferead.ReadCapped(path)
	if err != nil {
		return nil
	}
	var out []gitHostSetting
	var sec, sub string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		if l[0] == '[' {
			var rest string
			sec, sub, rest = gitSectionHeader(l)
			if l = strings.TrimSpace(rest); l == "" {
				continue
			}
		}
		keys, ok := gitCarried[sec]
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(l, "=")
		key, ok := keys[strings.ToLower(strings.TrimSpace(k))]
		if !ok {
			continue
		}
		v = gitValue(v)
		if v == "" || sec == "url" && sub == "" {
			continue
		}
		if key == "sslCAInfo" {
			if rel, ok := strings.CutPrefix(v, "~/"); ok {
				v = filepath.Join(home, rel)
			}
			if !filepath.IsAbs(v) {
				continue
			}
		}
		out = append(out, gitHostSetting{section: sec, sub: sub, key: key, value: v})
	}
	return out
}

// gitSectionHeader parses `[section "subsection"] rest`: the section
// lower-cased, the subsection unescaped, and what follows the bracket (a
// key on the same line).
func gitSectionHeader(l string) (sec, sub, rest string) {
	end := strings.IndexByte(l, ']')
	if q := strings.IndexByte(l, '"'); q >= 0 && (end < 0 || q < end) {
		var b strings.Builder
		i := q + 1
		for ; i < len(l) && l[i] != '"'; i++ {
			if l[i] == '\\' && i+1 < len(l) {
				i++
			}
			b.WriteByte(l[i])
		}
		sub = b.String()
		end = strings.IndexByte(l[min(i, len(l)):], ']')
		if end >= 0 {
			end += i
		}
		l2 := strings.TrimSpace(l[1:q])
		sec = strings.ToLower(l2)
	} else if end >= 0 {
		sec = strings.ToLower(strings.TrimSpace(l[1:end]))
	}
	if end < 0 {
		// git refuses a header it cannot close: nothing below it is read.
		return "", "", ""
	}
	return sec, sub, l[end+1:]
}

// gitValue is a config value as git reads it: quotes joined, escapes
// undone, a comment outside quotes dropped, surrounding blanks trimmed.
func gitValue(v string) string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"':
			quoted = !quoted
		case c == '\\' && i+1 < len(v):
			i++
			switch v[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(v[i])
			}
		case !quoted && (c == '#' || c == ';'):
			return strings.TrimSpace(b.String())
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}

// gitHostSection is the carried settings as gitconfig text.
func gitHostSection(settings []gitHostSetting) []byte {
	var b bytes.Buffer
	last := ""
	for _, s := range settings {
		head := "[" + s.section + "]\n"
		if s.sub != "" {
			head = "[" + s.section + " " + gitQuote(s.sub) + "]\n"
		}
		if head != last {
			b.WriteString(head)
			last = head
		}
		b.WriteString("\t" + s.key + " = " + gitQuote(s.value) + "\n")
	}
	return b.Bytes()
}

// gitCAFiles are the CA files the carried settings name, each once.
func gitCAFiles(settings []gitHostSetting) []string {
	var out []string
	for _, s := range settings {
		if s.key == "sslCAInfo" && !slices.Contains(out, s.value) {
			out = append(out, s.value)
		}
	}
	return out
}
