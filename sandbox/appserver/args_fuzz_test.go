package appserver

import (
	"slices"
	"testing"

	"github.com/cco-dev/cco/internal/argvfuzz"
)

// FuzzArgs checks the app-server rules on any codex command line:
//   - what follows "--" is the prompt and never changes a decision;
//   - Applies only when "agents" is named before "--", with no --remote, no
//     help and no version;
//   - the server's flags are the user's own words, in order, and hold
//     only -c/--config, --enable and --disable, each with its value;
//   - the server's directory is the value of a -C/--cd the user gave.
func FuzzArgs(f *testing.F) {
	for _, args := range [][]string{
		{"agents"}, {"-c", "k=v", "agents"}, {"-ck=v", "agents"}, {"--config=k=v", "--enable", "x", "agents"},
		{"-C", "/w", "--cd=/x", "agents"}, {"-m", "agents"}, {"-m", "-c", "agents"}, {"agents", "-c"},
		{"--remote", "unix:///s", "agents"}, {"agents", "--help"}, {"--", "agents"}, {"fix", "agents"},
		{"-s", "read-only", "-a", "never", "agents", "--disable=z"},
	} {
		f.Add(argvfuzz.Join(args...), "-h")
	}
	f.Fuzz(func(t *testing.T, s, prompt string) {
		args := argvfuzz.Split(s)
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
		if !argvfuzz.IsSubsequence(p.serverFlags, head) {
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
