package appserver

import "strings"

// subcommand is the one that needs the app-server.
const subcommand = "agents"

// valueFlags are Codex's top-level options that take a value, so that the
// value is not mistaken for the subcommand (`codex -m agents` runs the model
// "agents", not the subcommand). Long names are without "--", short ones
// without "-".
var valueFlags = map[string]bool{
	"config": true, "c": true,
	"enable": true, "disable": true,
	"image": true, "i": true,
	"model": true, "m": true,
	"profile": true, "p": true,
	"sandbox": true, "s": true,
	"ask-for-approval": true, "a": true,
	"cd": true, "C": true,
	"add-dir": true, "local-provider": true,
	"remote": true, "remote-auth-token-env": true,
}

// token is one option of the command line as Codex's parser sees it.
type token struct {
	name  string   // "config", "c", ... ; "" for a positional argument
	value string   // the option's value, or the positional argument
	raw   []string // the argv words it was made of
	long  bool
	// missing: an option that takes a value came last, without one.
	missing bool
}

// tokenize splits args into options (with their values) and positional
// arguments, up to a "--". The rest is the prompt, where Codex reads no
// option. An unknown option is taken to have no value, and `--x=v` carries
// its own.
func tokenize(args []string) []token {
	var out []token
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return out
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			t := token{name: name, value: val, raw: []string{a}, long: true}
			if !hasVal && valueFlags[name] {
				if hasNext(args, i) {
					i++
					t.value = args[i]
					t.raw = append(t.raw, args[i])
				} else {
					t.missing = true
				}
			}
			out = append(out, t)
		case len(a) > 1 && a[0] == '-':
			name := a[1:2]
			t := token{name: name, raw: []string{a}}
			if valueFlags[name] {
				switch {
				case len(a) > 2: // -ck=v
					t.value = strings.TrimPrefix(a[2:], "=")
				case hasNext(args, i):
					i++
					t.value = args[i]
					t.raw = append(t.raw, args[i])
				default:
					t.missing = true
				}
			} else if len(a) > 2 {
				t.name = a[1:]
			}
			out = append(out, t)
		default:
			out = append(out, token{value: a, raw: []string{a}})
		}
	}
	return out
}

// hasNext reports whether args[i+1] can be the value of the option at i.
// Codex's parser reads "--" as the end of the options, never as a value.
func hasNext(args []string, i int) bool {
	return i+1 < len(args) && args[i+1] != "--"
}

// Applies reports whether a codex command line (the user's arguments after
// the program name) is one that needs the jail's own app-server: the
// `agents` subcommand, not asking for help or a version and not naming a
// --remote of its own. Every other command runs Codex directly.
func Applies(args []string) bool {
	// Help anywhere among the options wins, even as another option's
	// value. After "--" it is the prompt.
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" {
			return false
		}
	}
	sub := ""
	for _, t := range tokenize(args) {
		switch {
		case t.long && t.name == "remote":
			return false
		case t.long && (t.name == "help" || t.name == "version"), !t.long && (t.name == "V" || t.name == "h"):
			return false
		case t.name == "" && sub == "":
			sub = t.value
		}
	}
	return sub == subcommand
}

// plan is what Run starts, derived from the user's arguments.
type plan struct {
	// serverFlags are the user's -c/--config, --enable and --disable
	// options, word for word, for the server's command line.
	serverFlags []string
	// dir is the last -C/--cd, the server's working directory ("" for the
	// current one).
	dir string
}

func planFor(args []string) plan {
	var p plan
	for _, t := range tokenize(args) {
		if t.missing {
			continue // Codex itself reports the missing value
		}
		switch {
		case t.long && (t.name == "config" || t.name == "enable" || t.name == "disable"),
			!t.long && t.name == "c":
			p.serverFlags = append(p.serverFlags, t.raw...)
		case t.long && t.name == "cd", !t.long && t.name == "C":
			p.dir = t.value
		}
	}
	return p
}
