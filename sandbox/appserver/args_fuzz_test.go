package appserver

import (
	"slices"
	"strings"
	"testing"
)

// fuzzArgs splits a fuzzed string into arguments at NUL, the one byte no
// argv entry holds.
func fuzzArgs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// FuzzArgs checks the app-server rules on any codex command line:
//   - what follows "--" is the prompt and never changes a decision;
//   - Applies only when "agents" is named before "--", with no --remote, no
//     help and no version;
//   - the server's flags are the user's own words, in order, and hold
//     only -c/--config, --enable and --disable, each with its value;
//   - the server's directory is the value of a -C/--cd the user gave.
func FuzzArgs(f *testing.F) {
	for _, s := range []string{
		"agents", "-c\x00k=v\x00agents", "-ck=v\x00agents", "--config=k=v\x00--enable\x00x\x00agents",
		"-C\x00/w\x00--cd=/x\x00agents", "-m\x00agents", "-m\x00-c\x00agents", "agents\x00-c",
		"--remote\x00unix:///s\x00agents", "agents\x00--help", "--\x00agents", "fix\x00agents",
		"-s\x00read-only\x00-a\x00never\x00agents\x00--disable=z",
	} {
		f.Add(s, "-h")
	}
	f.Fuzz(func(t *testing.T, s, prompt string) {
		args := fuzzArgs(s)
		head := args
		if i := slices.Index(args, "--"); i >= 0 {
			head = args[:i]
		} else {
			withPrompt := append(slices.Clone(args), "--", prompt)
			if Applies(withPrompt) != Applies(args) {
				t.Fatalf("Applies(%q) = %v, but with the prompt %q after -- it is %v", args, Applies(args), prompt, !Applies(args))
			}
			if p, q := planFor(args), planFor(withPrompt); !slices.Equal(p.serverFlags, q.serverFlags) || p.dir != q.dir {
				t.Fatalf("planFor(%q) = %+v, but with the prompt %q after -- it is %+v", args, p, prompt, q)
			}
		}
		if Applies(args) {
			if !slices.Contains(head, subcommand) || slices.Contains(head, "-h") || slices.Contains(head, "--help") {
				t.Fatalf("Applies(%q) without the subcommand, or despite a help", args)
			}
			for _, tk := range tokenize(args) {
				if tk.long && (tk.name == "remote" || tk.name == "version") || !tk.long && tk.name == "V" {
					t.Fatalf("Applies(%q) despite %q", args, tk.raw)
				}
			}
		}

		p := planFor(args)
		if !isSubsequence(p.serverFlags, head) {
			t.Fatalf("planFor(%q): server flags %q are not the user's words in order", args, p.serverFlags)
		}
		for _, tk := range tokenize(p.serverFlags) {
			config := tk.long && (tk.name == "config" || tk.name == "enable" || tk.name == "disable") || !tk.long && tk.name == "c"
			if !config || tk.missing {
				t.Fatalf("planFor(%q): server flags %q hold %q", args, p.serverFlags, tk.raw)
			}
		}
		if p.dir != "" && !slices.ContainsFunc(tokenize(args), func(tk token) bool {
			return (tk.long && tk.name == "cd" || !tk.long && tk.name == "C") && tk.value == p.dir
		}) {
			t.Fatalf("planFor(%q): server directory %q is no -C/--cd of the user's", args, p.dir)
		}
	})
}

// isSubsequence reports whether every element of sub appears in s, in order.
func isSubsequence(sub, s []string) bool {
	i := 0
	for _, x := range s {
		if i < len(sub) && sub[i] == x {
			i++
		}
	}
	return i == len(sub)
}
