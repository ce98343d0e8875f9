package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/argvfuzz"
)

// beforeDashDash is args up to the first "--", the part the rewriters own.
func beforeDashDash(args []string) ([]string, []string) {
	if i := slices.Index(args, "--"); i >= 0 {
		return args[:i], args[i:]
	}
	return args, nil
}

func addArgSeeds(f *testing.F, seeds ...[]string) {
	for _, s := range seeds {
		f.Add(argvfuzz.Join(s...), true)
		f.Add(argvfuzz.Join(s...), false)
	}
}

// FuzzClaudeArgs checks claude's rewrite on any argv: --no-chrome comes
// first, then the permissions bypass when asked for, each exactly once in
// the part before "--"; --chrome never survives there; the rest is the
// user's arguments in their order, and after "--" nothing changes.
func FuzzClaudeArgs(f *testing.F) {
	addArgSeeds(f, nil, []string{"--chrome"}, []string{"--chrome=yes", "-p", "hi"},
		[]string{"--no-chrome", "--dangerously-skip-permissions", "--", "--chrome"},
		[]string{"mcp", "add", "--chrome", "x"}, []string{"--", "--dangerously-skip-permissions"})
	p, _ := Lookup("claude")
	f.Fuzz(func(t *testing.T, s string, skip bool) {
		user := argvfuzz.Split(s)
		got := p.Args(user, Options{SkipPermissions: skip})
		if len(user) == 1 && claudeVersionFlags[user[0]] {
			if !slices.Equal(got, user) {
				t.Fatalf("Args(%q) = %q: a lone version flag must pass alone", user, got)
			}
			return
		}
		injected := []string{"--no-chrome"}
		if skip {
			injected = append(injected, "--dangerously-skip-permissions")
		}
		if len(got) < len(injected) || !slices.Equal(got[:len(injected)], injected) {
			t.Fatalf("Args(%q) = %q: does not start with %q", user, got, injected)
		}
		head, tail := beforeDashDash(got)
		_, userTail := beforeDashDash(user)
		if !slices.Equal(tail, userTail) {
			t.Fatalf("Args(%q) = %q: the part from -- on changed", user, got)
		}
		for _, a := range head[len(injected):] {
			if a == "--chrome" || strings.HasPrefix(a, "--chrome=") || slices.Contains(injected, a) {
				t.Fatalf("Args(%q) = %q: %q survived", user, got, a)
			}
		}
		if !argvfuzz.IsSubsequence(got[len(injected):], user) {
			t.Fatalf("Args(%q) = %q: not the user's arguments in order", user, got)
		}
	})
}

// codexFlag is one flag as Codex parses it, with its value.
type codexFlag struct{ name, val string }

// codexFlags walks args before "--" the way Codex parses them: a
// value-taking flag written apart takes the next argument as its value,
// never as a flag.
func codexFlags(args []string) []codexFlag {
	var flags []codexFlag
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		name, val, hasVal := splitFlag(a)
		if codexValueFlags[name] && !hasVal && i+1 < len(args) {
			i++
			val = args[i]
		}
		flags = append(flags, codexFlag{name, val})
	}
	return flags
}

// FuzzCodexArgs checks codex's rewrite on any argv. Before "--", no flag
// that re-enables Codex's sandbox or approvals survives (-s/--sandbox,
// -a/--ask-for-approval, --full-auto, a -c override of sandbox_mode or
// approval_policy). The bypass is there exactly once unless the user named
// a subcommand that does not take it. A read-only session (codexReadOnly)
// has no bypass: its approvals survive, and Codex's own sandbox is off
// (--sandbox danger-full-access) once, where the bypass would be. What remains is the user's arguments
// in their order, and after "--" nothing changes.
func FuzzCodexArgs(f *testing.F) {
	addArgSeeds(f, nil, []string{"-s", "read-only"}, []string{"-sread-only"}, []string{"--sandbox=x", "exec", "hi"},
		[]string{"-m", "-s", "hi"}, []string{"exec", "--full-auto", "-c", "sandbox_mode=x"}, []string{"login"},
		[]string{"-c", "model=o3", "resume", "--last"}, []string{"--", "-s"}, []string{"mcp", "--", "-s"},
		[]string{"-a", "never", "--yolo", codexBypass}, []string{"-c"}, []string{"--config=approval_policy=never"})
	p, _ := Lookup("codex")
	f.Fuzz(func(t *testing.T, s string, skip bool) {
		user := argvfuzz.Split(s)
		got := p.Args(user, Options{SkipPermissions: skip})
		head, tail := beforeDashDash(got)
		userHead, userTail := beforeDashDash(user)
		if !slices.Equal(tail, userTail) {
			t.Fatalf("Args(%q) = %q: the part from -- on changed", user, got)
		}
		readOnly := codexReadOnly(user)
		if p.ReadOnlyWorkspace(user) != readOnly {
			t.Fatalf("ReadOnlyWorkspace(%q) is not codexReadOnly's answer", user)
		}
		n, off := 0, 0
		for _, fl := range codexFlags(head) {
			switch fl.name {
			case "-s", "--sandbox":
				// A read-only session's own sandbox off is the one -s.
				if !readOnly || fl.name != "--sandbox" || fl.val != "danger-full-access" {
					t.Fatalf("Args(%q) = %q: %s %s survived", user, got, fl.name, fl.val)
				}
				off++
			case "-a", "--ask-for-approval":
				if !readOnly {
					t.Fatalf("Args(%q) = %q: %s survived", user, got, fl.name)
				}
			case "--full-auto", "--yolo":
				t.Fatalf("Args(%q) = %q: %s survived", user, got, fl.name)
			case "-c", "--config":
				if codexPolicyKey().MatchString(fl.val) && !(readOnly && codexApprovalKey().MatchString(fl.val)) {
					t.Fatalf("Args(%q) = %q: the override %q survived", user, got, fl.val)
				}
			case codexBypass:
				n++
			}
		}
		if readOnly {
			if n != 0 || off > 1 || off == 0 && !slices.ContainsFunc(head, isCodexSubcommand) {
				t.Fatalf("Args(%q) = %q: read-only asked; bypass %d times, own sandbox off %d times", user, got, n, off)
			}
			rest := slices.Clone(got)
			if i := slices.Index(rest, "danger-full-access"); off == 1 && i > 0 {
				rest = slices.Delete(rest, i-1, i+1)
			}
			if !argvfuzz.IsSubsequence(rest, user) {
				t.Fatalf("Args(%q) = %q: not the user's arguments in order", user, got)
			}
			return
		}
		if n > 1 {
			t.Fatalf("Args(%q) = %q: the bypass %d times", user, got, n)
		}
		if n == 0 && !slices.ContainsFunc(head, isCodexSubcommand) {
			t.Fatalf("Args(%q) = %q: no bypass, and no subcommand that refuses it", user, got)
		}
		rest := slices.DeleteFunc(slices.Clone(got), func(a string) bool { return a == codexBypass })
		userRest := slices.DeleteFunc(slices.Clone(userHead), func(a string) bool { return a == codexBypass })
		if !argvfuzz.IsSubsequence(rest, append(userRest, userTail...)) {
			t.Fatalf("Args(%q) = %q: not the user's arguments in order", user, got)
		}
	})
}

// geminiFlag is one flag and its index in the argv.
type geminiFlag struct {
	name string
	at   int
}

// geminiFlags walks args before "--" as geminiArgs does: a value-taking
// flag written apart takes the next argument as its value, unless that
// argument is "--".
func geminiFlags(args []string) []geminiFlag {
	var flags []geminiFlag
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		name, _, hasVal := splitFlag(a)
		flags = append(flags, geminiFlag{name, i})
		if geminiValueFlags[name] && !hasVal && takesNext(args, i) {
			i++
		}
	}
	return flags
}

// isGeminiSandbox is a flag that asks for Gemini CLI's own sandbox: -s,
// --sandbox or --sandbox=VALUE.
func isGeminiSandbox(a string) bool {
	return a == "-s" || a == "--sandbox" || strings.HasPrefix(a, "--sandbox=")
}

// FuzzGeminiArgs checks gemini's rewrite on any argv. Before "--", no
// -s, --sandbox or --sandbox=VALUE survives as a flag; the same word as a
// value-taking flag's value is the user's and stays. --skip-trust is
// injected, once and first, exactly when the run is headless (a -p or
// --prompt flag) and the user gave no --skip-trust of their own. Nothing
// else is dropped or added, and from "--" on nothing changes.
func FuzzGeminiArgs(f *testing.F) {
	addArgSeeds(f, nil, []string{"-s", "hi"}, []string{"--sandbox=true", "-p", "x"}, []string{"-p", "-s"},
		[]string{"-m", "-p"}, []string{"-p", "--", "-s"}, []string{"--prompt=x", "--skip-trust"},
		[]string{"-phello", "--sandbox"}, []string{"--", "-p", "-s"}, []string{"-m"}, []string{"-sx", "--sandboxed"})
	p, _ := Lookup("gemini")
	f.Fuzz(func(t *testing.T, s string, skip bool) {
		user := argvfuzz.Split(s)
		got := p.Args(user, Options{SkipPermissions: skip})
		userHead, userTail := beforeDashDash(user)
		headless, trusted := false, false
		drop := map[int]bool{}
		for _, fl := range geminiFlags(userHead) {
			switch {
			case isGeminiSandbox(userHead[fl.at]):
				drop[fl.at] = true
			case fl.name == "-p" || fl.name == "--prompt":
				headless = true
			case fl.name == "--skip-trust":
				trusted = true
			}
		}
		var want []string
		if headless && !trusted {
			want = append(want, "--skip-trust")
		}
		for i, a := range userHead {
			if !drop[i] {
				want = append(want, a)
			}
		}
		want = append(want, userTail...)
		if !slices.Equal(got, want) {
			t.Fatalf("Args(%q) = %q, want %q", user, got, want)
		}
		head, tail := beforeDashDash(got)
		if !slices.Equal(tail, userTail) {
			t.Fatalf("Args(%q) = %q: the part from -- on changed", user, got)
		}
		for _, fl := range geminiFlags(head) {
			if isGeminiSandbox(head[fl.at]) {
				t.Fatalf("Args(%q) = %q: %s survived", user, got, head[fl.at])
			}
		}
	})
}

// FuzzOpencodeArgs checks opencode's rewrite on any argv: --pure (which
// drops cco's guard plugin) never survives before "--", in any spelling;
// the rest is the user's arguments in their order, and after "--" nothing
// changes.
func FuzzOpencodeArgs(f *testing.F) {
	addArgSeeds(f, nil, []string{"--pure"}, []string{"run", "--pure=1", "hi"}, []string{"--pure", "true", "x"},
		[]string{"run", "--", "--pure"})
	p, _ := Lookup("opencode")
	f.Fuzz(func(t *testing.T, s string, _ bool) {
		user := argvfuzz.Split(s)
		got, head := strippedOnly(t, p, user)
		for _, a := range head {
			if a == "--pure" || strings.HasPrefix(a, "--pure=") {
				t.Fatalf("Args(%q) = %q: %q survived", user, got, a)
			}
		}
	})
}

// strippedOnly is a rewrite that only strips: the result is the user's
// arguments in their order, and from "--" on nothing changes. It returns
// the result and its part before "--".
func strippedOnly(t *testing.T, p *Profile, user []string) (got, head []string) {
	t.Helper()
	got = p.Args(user, Options{})
	head, tail := beforeDashDash(got)
	_, userTail := beforeDashDash(user)
	if !slices.Equal(tail, userTail) {
		t.Fatalf("Args(%q) = %q: the part from -- on changed", user, got)
	}
	if !argvfuzz.IsSubsequence(got, user) {
		t.Fatalf("Args(%q) = %q: not the user's arguments in order", user, got)
	}
	return got, head
}

// FuzzCopilotArgs checks copilot's rewrite on any argv: --prefer-version
// never survives as a flag before "--" (a value of -p may spell it); the
// rest is the user's arguments in their order, and after "--" nothing
// changes.
func FuzzCopilotArgs(f *testing.F) {
	addArgSeeds(f, nil, []string{"--prefer-version", "1.0.0"}, []string{"-p", "--prefer-version"},
		[]string{"--prefer-version=2", "--", "--prefer-version"}, []string{"--prefer-version", "--", "x"})
	p, _ := Lookup("copilot")
	f.Fuzz(func(t *testing.T, s string, _ bool) {
		user := argvfuzz.Split(s)
		got, head := strippedOnly(t, p, user)
		for i := 0; i < len(head); i++ {
			name, _, hasVal := splitFlag(head[i])
			if name == "--prefer-version" {
				t.Fatalf("Args(%q) = %q: --prefer-version survived", user, got)
			}
			if copilotValueFlags[name] && !hasVal {
				i++ // its value, whatever it spells
			}
		}
	})
}
