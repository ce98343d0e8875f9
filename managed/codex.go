package managed

import (
	"errors"
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/provision"
)

// Codex's policy files (target-system paths).
const (
	CodexRequirementsPath  = "/etc/codex/requirements.toml"
	CodexManagedConfigPath = "/etc/codex/managed_config.toml"
)

// codexName is the profile whose policy this file handles.
const codexName = "codex"

func init() { register(codexName, codexPolicy{}) }

// codexPolicy is Codex's handler: requirements.toml (the hooks) and
// managed_config.toml (the update check), each owned or refused.
type codexPolicy struct{}

func (codexPolicy) steps(cfg Config) []provision.Step {
	return []provision.Step{newRequirementsStep(cfg), newManagedConfigStep(cfg)}
}

func (codexPolicy) foreignFile() string { return "requirements.toml" }

func (codexPolicy) wired(root *provision.Root, rc *provision.Receipt) Wiring {
	return codexWiring(root, rc)
}

// codexParse adapts ParseCodexPolicy to an ownedStep: present reports
// whether the foreign file already does what cco needs, snippet what to
// merge into it.
func codexParse(present func(CodexPolicy) bool, snippet func(CodexPolicy) string) func(string, []byte) (bool, string, error) {
	return func(path string, b []byte) (bool, string, error) {
		p, err := ParseCodexPolicy(path, b)
		if err != nil {
			return false, snippet(CodexPolicy{}), err
		}
		return present(p), snippet(p), nil
	}
}

// codexOwned is one of Codex's files as an ownedStep; codex refuses a policy
// file that does not parse.
func codexOwned(cfg Config, file *provision.File, what string) *ownedStep {
	return &ownedStep{
		file: file, agent: codexName, policy: cfg.foreign(codexName), what: what, done: "guard present",
		syntaxFix: "fix the TOML at that line (codex refuses a policy file that does not parse), then run cco-install again",
	}
}

func newRequirementsStep(cfg Config) *ownedStep {
	s := codexOwned(cfg, policyFile("policy.codex.requirements", "write Codex's requirements.toml with cco's guard hooks",
		CodexRequirementsPath, CodexRequirements()), "wire cco's guard hooks")
	s.parse = codexParse(func(p CodexPolicy) bool {
		return p.Wires() && (p.FeatureHooks == nil || *p.FeatureHooks)
	}, requirementsSnippet)
	return s
}

func newManagedConfigStep(cfg Config) *ownedStep {
	s := codexOwned(cfg, policyFile("policy.codex.managed-config", "write Codex's managed_config.toml that turns off its own update check",
		CodexManagedConfigPath, CodexManagedConfig()), "set check_for_update_on_startup = false")
	s.done, s.doneWhy = "present", " already sets check_for_update_on_startup = false"
	s.parse = codexParse(func(p CodexPolicy) bool {
		return p.CheckForUpdate != nil && !*p.CheckForUpdate
	}, func(p CodexPolicy) string {
		if p.CheckForUpdate != nil {
			return "# change the existing top-level key to:\ncheck_for_update_on_startup = false\n"
		}
		return "# at the top level, before the first [table] header:\ncheck_for_update_on_startup = false\n"
	})
	return s
}

// requirementsSnippet is the TOML to append to a foreign requirements.toml:
// only what it lacks, and for a [features] table it already has, the one key
// to put there (appending a second [features] header would not parse).
func requirementsSnippet(p CodexPolicy) string {
	var b strings.Builder
	b.WriteString("# cco's guard hooks (" + guard.PromptGateScript + ", " + guard.SessionStartScript + ")\n")
	switch {
	case !p.Features:
		b.WriteString("[features]\nhooks = true\n\n")
	case p.FeatureHooks == nil:
		b.WriteString("# add to the existing [features] table:\n#   hooks = true\n\n")
	case !*p.FeatureHooks:
		b.WriteString("# in the existing [features] table, change hooks = false to:\n#   hooks = true\n\n")
	}
	b.WriteString(codexHooks(!p.SessionStart, !p.PromptGate))
	return b.String()
}

// codexHooks is the [[hooks.*]] part of requirements.toml, also the bulk of
// the snippet for a foreign file.
func codexHooks(start, gate bool) string {
	var b strings.Builder
	if start {
		fmt.Fprintf(&b, "[[hooks.SessionStart]]\nmatcher = \"startup\"\n[[hooks.SessionStart.hooks]]\ntype = \"command\"\ncommand = %q\ntimeout = %d\n",
			guard.Command(guard.HookSessionStart, codexName), hookTimeout)
	}
	if start && gate {
		b.WriteString("\n")
	}
	if gate {
		fmt.Fprintf(&b, "[[hooks.UserPromptSubmit]]\n[[hooks.UserPromptSubmit.hooks]]\ntype = \"command\"\ncommand = %q\ntimeout = %d\n",
			guard.Command(guard.HookPromptGate, codexName), hookTimeout)
	}
	return b.String()
}

// CodexRequirements is the requirements.toml cco writes. It pins
// features.hooks so that no lower layer (a user's or a project's
// config.toml) can switch the hooks off, and it sets no allowed_sandbox_modes
// or allowed_approval_policies: the wrapper needs danger-full-access
// (--dangerously-bypass-approvals-and-sandbox), since the jail is the sandbox.
func CodexRequirements() []byte {
	return []byte(Marker + "\n" +
		"# Makes codex run cco's guard; the jail, not codex's own sandbox, confines it.\n\n" +
		"[features]\nhooks = true\n\n" + codexHooks(true, true))
}

// CodexManagedConfig is the managed_config.toml cco writes: codex installed
// by cco is updated by cco-install, never by itself.
func CodexManagedConfig() []byte {
	return []byte(Marker + "\n" + "check_for_update_on_startup = false\n")
}

// CodexPolicy is what a Codex requirements.toml or managed_config.toml says
// about the guard.
type CodexPolicy struct {
	SessionStart bool // [[hooks.SessionStart]] runs our verifier for startup
	PromptGate   bool // [[hooks.UserPromptSubmit]] runs our gate
	// Features is set when the file has a [features] table; FeatureHooks
	// when it sets features.hooks.
	Features     bool
	FeatureHooks *bool
	// CheckForUpdate is check_for_update_on_startup, when set.
	CheckForUpdate *bool
}

// codexFile is the part of Codex's TOML policy format that cco reads. cco
// writes it as text (CodexRequirements), for the comments and the order.
type codexFile struct {
	Features       map[string]any         `toml:"features"`
	Hooks          map[string][]hookGroup `toml:"hooks"`
	CheckForUpdate *bool                  `toml:"check_for_update_on_startup"`
}

// ParseCodexPolicy parses a Codex policy file. A file that does not parse
// gives a *SyntaxError with the TOML parser's line and column.
func ParseCodexPolicy(path string, b []byte) (CodexPolicy, error) {
	var p CodexPolicy
	var f codexFile
	if _, err := toml.Decode(string(b), &f); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return p, &SyntaxError{Path: path, Line: pe.Position.Line, Col: pe.Position.Col, Msg: pe.Message}
		}
		return p, fmt.Errorf("%s does not parse: %w", path, err)
	}
	p.CheckForUpdate = f.CheckForUpdate
	if f.Features != nil {
		p.Features = true
		if v, ok := f.Features["hooks"].(bool); ok {
			p.FeatureHooks = &v
		}
	}
	p.SessionStart = wiresHook(f.Hooks["SessionStart"], guard.HookSessionStart, codexName, true)
	p.PromptGate = wiresHook(f.Hooks["UserPromptSubmit"], guard.HookPromptGate, codexName, false)
	return p, nil
}

// Wires reports whether the file runs both of our hooks.
func (p CodexPolicy) Wires() bool { return p.SessionStart && p.PromptGate }

func codexWiring(root *provision.Root, rc *provision.Receipt) Wiring {
	w, b, ok := readWiring(root, codexName, CodexRequirementsPath)
	if !ok {
		return w
	}
	p, err := ParseCodexPolicy(CodexRequirementsPath, b)
	switch {
	case err != nil:
		w.State, w.Detail = Malformed, err.Error()
		w.Fix = "fix the TOML syntax at that line, then run `sudo cco-install`"
	case !p.Wires():
		w.notWired(rc)
	case p.FeatureHooks != nil && !*p.FeatureHooks:
		w.State = Defeated
		w.Detail = CodexRequirementsPath + " sets [features] hooks = false, which turns the guard hooks off"
		w.Fix = "set hooks = true in its [features] table"
	default:
		w.wired(root, rc)
	}
	return w
}
