// Command cco-install provisions a machine for cco: the shadow under every
// agent's name, the jail's helper and configuration, the guard and the
// vendors' managed policy, and the vendors' real binaries off PATH. It is
// idempotent: a second run changes nothing and says so.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/safetext"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/verify"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usageError is a bad command line: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// runError is a run that started and ended with code.
type runError struct {
	code int
	err  error
}

func (e runError) Error() string { return e.err.Error() }
func (e runError) Unwrap() error { return e.err }

// options are the command line's own switches (not configuration keys).
type options struct {
	root           string
	dryRun         bool
	diff           bool
	yes            bool
	force          bool
	json           bool
	verify         bool
	out            string
	sub            string
	hostRoot       bool
	uninstall      bool
	fixRC          bool
	noAppArmor     bool
	image          bool
	installDeps    bool
	agent          string
	user           string
	upgrade        []string
	rollback       []string
	allowDowngrade bool
	adopt          bool

	// wrote is set once the run's JSON document is on stdout: a failure
	// after that adds none, one before it gets the error document.
	wrote bool
}

// io is the run's standard streams.
type stdio struct {
	in          io.Reader
	out, errOut io.Writer
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o := &options{}
	// Every byte cco-install prints goes through the one printer: the
	// values it quotes are escaped where they sit, and this is the net.
	stdout, stderr = printer{stdout, &o.json}, safetext.Writer{W: stderr}
	ctx, stop := notifyContext(context.Background(), stderr)
	defer stop()
	cmd := newCommand(ctx, o, stdio{stdin, stdout, stderr})
	cmd.SetArgs(args)
	err := cmd.Execute()
	code := exitCode(err)
	if interrupted(ctx) {
		if err != nil && err.Error() != "" {
			fmt.Fprintf(stderr, "cco-install: interrupted: %s\n", errText(err))
		} else {
			fmt.Fprintln(stderr, "cco-install: interrupted")
		}
		code = interruptCode(ctx)
		if err == nil {
			err = errors.New("interrupted")
		}
	} else if err != nil && err.Error() != "" {
		var ue usageError
		switch {
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "cco-install: %s\nrun 'cco-install --help' for usage\n", errText(err))
		case code != provision.ExitUsage:
			fmt.Fprintf(stderr, "cco-install: %s\n", errText(err))
		default: // cobra's own: a flag or argument it could not parse
			fmt.Fprintf(stderr, "cco-install: %s\nrun 'cco-install --help' for usage\n", errText(err))
		}
	}
	if err != nil && err.Error() != "" && !o.wrote && (o.json || wantsJSON(args)) {
		o.json = true // the printer's mode, on a command line that did not parse
		writeErrorJSON(stdout, err)
	}
	return code
}

// exitCode maps a command's error onto the documented exit codes.
func exitCode(err error) int {
	var re runError
	var ue usageError
	switch {
	case err == nil:
		return provision.ExitOK
	case errors.As(err, &ue):
		return provision.ExitUsage
	case errors.As(err, &re):
		if re.code == 0 {
			return provision.ExitFailed
		}
		return re.code
	}
	return provision.ExitUsage
}

// wantsJSON sees --json on a command line that did not parse.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// errorDoc is the one JSON document of a run that could not start.
type errorDoc struct {
	Schema  int    `json:"schema"`
	Version string `json:"version"`
	Error   string `json:"error"`
}

func writeErrorJSON(w io.Writer, err error) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(errorDoc{Schema: provision.ReportSchema, Version: provision.Version, Error: err.Error()})
}

// modes are the switches and commands that exclude each other.
var modeFlags = []string{"uninstall", "upgrade", "rollback"}

// checkModes refuses two modes at once, before anything runs.
func checkModes(cmd *cobra.Command, sub string) error {
	var set []string
	if sub != "" {
		set = append(set, sub)
	}
	for _, m := range modeFlags {
		if f := cmd.Flags().Lookup(m); f != nil && f.Changed {
			set = append(set, "--"+m)
		}
	}
	if len(set) > 1 {
		return usageError{fmt.Sprintf("%s exclude each other: run one at a time", strings.Join(set, " and "))}
	}
	return nil
}

// guardModes gives a command that is itself a mode the other modes' flags,
// hidden, so that `status --uninstall` is the modes' usage error rather
// than an unknown flag.
func guardModes(cmd *cobra.Command) {
	cmd.Flags().Bool("uninstall", false, "")
	cmd.Flags().StringSlice("upgrade", nil, "")
	cmd.Flags().StringSlice("rollback", nil, "")
	for _, m := range modeFlags {
		cmd.Flags().MarkHidden(m)
	}
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasSubCommands() {
		return usageError{fmt.Sprintf("unknown command %q (unexpected argument; the commands are %s)", args[0], commandNames(cmd))}
	}
	return usageError{fmt.Sprintf("unexpected argument %q", args[0])}
}

func commandNames(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}

const exitCodes = `Exit codes:
  0    success (status: in sync)
  1    failure (a step failed, a preflight check refused, the run could not start)
  2    usage error (bad flags, modes that exclude each other, --uninstall
       without a terminal and without --yes)
  3    conflicts left unresolved (status: not in sync; one finding per cause)
  130  interrupted by SIGINT (^C); 143 by SIGTERM
`

func newCommand(ctx context.Context, o *options, sio stdio) *cobra.Command {
	root := &cobra.Command{
		Use:   "cco-install",
		Short: "provision a machine for cco: the shadow, the jail, the guard and the agents",
		Long: `cco-install provisions a machine for cco: the shadow under every agent's name,
the jail's helper and configuration, the guard and the vendors' managed policy,
and the vendors' real binaries off PATH. It is idempotent: a second run changes
nothing and says so.

` + exitCodes,
		Version:       provision.Version,
		Args:          noArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Root() == cmd {
				return checkModes(cmd, "")
			}
			if f := cmd.Flags().Lookup("uninstall"); f != nil {
				return checkModes(cmd, cmd.Name())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.sub = "install"
			return runE(ctx, cmd, o, sio)
		},
	}
	root.SetIn(sio.in)
	root.SetOut(sio.out)
	root.SetErr(sio.errOut)
	root.SetVersionTemplate("cco-install {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{safetext.Escape(err.Error())} })
	root.CompletionOptions.HiddenDefaultCmd = false
	root.PersistentFlags().StringVar(&o.root, "root", "", "resolve every system path under this directory (stage an image, test)")
	root.PersistentFlags().BoolVar(&o.json, "json", false, "print exactly one JSON document on stdout (a failed run too: it carries an error field)")

	fs := root.Flags()
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the plan and write nothing (exit 3 if it finds conflicts)")
	fs.BoolVar(&o.diff, "diff", false, "add unified diffs of the files that would change")
	fs.BoolVar(&o.yes, "yes", false, "answer yes to prompts (no prompt is shown without a terminal, where --uninstall needs --yes)")
	fs.BoolVar(&o.force, "force", false, "replace owned files that were edited, keeping a backup under /var/lib/cco/backups")
	// Every agent, and all: the help says what the flags take.
	agentsOrAll := agent.List(append(agent.Names(), "all"), "or")
	fs.StringSliceVar(&o.upgrade, "upgrade", nil, "fetch the newest release of the configured channel (or the pin) for "+agentsOrAll+", and switch to it atomically")
	fs.StringSliceVar(&o.rollback, "rollback", nil, "switch "+agentsOrAll+" back to the previous (older) installed version; never forward")
	fs.BoolVar(&o.allowDowngrade, "allow-downgrade", false, "let --upgrade move to an older release than the installed one")
	fs.BoolVar(&o.adopt, "adopt-existing", false, "use a Claude Code binary found in a user's home (the vendor's installer) instead of downloading it, when it verifies against the manifest")
	fs.BoolVar(&o.noAppArmor, "no-apparmor", false, "where AppArmor blocks bwrap's user namespaces, refuse with the fix instead of installing a profile")
	fs.BoolVar(&o.image, "image", false, "an image build: no user-namespace probe, no chown (also detected from the target's /.dockerenv, /run/.containerenv)")
	fs.BoolVar(&o.fixRC, "fix-rc", false, "remove the vendors' PATH blocks from users' shell start-up files (backups under /var/lib/cco/backups)")
	fs.BoolVar(&o.uninstall, "uninstall", false, "undo exactly what the receipt records and put relocated vendor files back (asks Proceed? [y/N] on a terminal; without one it needs --yes)")
	fs.BoolVar(&o.installDeps, "install-deps", false, "install bubblewrap with apt-get or dnf when it is missing")
	addConfigFlags(fs)

	status := &cobra.Command{
		Use:   "status",
		Short: "check the installation: the plan's own checks, read-only (exit 3: not in sync)",
		Long: `status runs every step's check over a read-only view of the system and reports
one finding per cause: an agent that is configured but not installed, an owned
file missing or changed, bubblewrap missing or too old, user namespaces that
do not work, a vendor install back in a home. It writes nothing and needs no
root; what it cannot read without root it says it skipped.

` + exitCodes,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.sub = "status"
			return runE(ctx, cmd, o, sio)
		},
	}
	status.Flags().BoolVar(&o.verify, "verify", false, "re-hash every owned file instead of trusting size, mtime and inode")
	guardModes(status)

	config := &cobra.Command{
		Use:   "config",
		Short: "show every configuration key's effective value and where it came from",
		Long: `config shows every key of /etc/cco/install.toml with its effective value and
source (default < file < CCO_* environment < flag). A key that cannot be read is
marked with its line and column, and the rest are still shown (exit 1).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.sub = "config"
			return runE(ctx, cmd, o, sio)
		},
	}
	addConfigFlags(config.Flags())

	bundle := &cobra.Command{
		Use:   "bundle --out FILE.tar.xz",
		Short: "fetch the resolved releases into one offline bundle",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.sub = "bundle"
			return runE(ctx, cmd, o, sio)
		},
	}
	bundle.Flags().StringVar(&o.out, "out", "", "the bundle to write (FILE.tar.xz)")
	addConfigFlags(bundle.Flags())
	guardModes(bundle)

	version := &cobra.Command{
		Use:   "version",
		Short: "print cco-install's version (with --json, a JSON document)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.json {
				o.wrote = true
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(versionDoc{Schema: provision.ReportSchema, Version: provision.Version})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cco-install %s\n", provision.Version)
			return nil
		},
	}

	man := &cobra.Command{
		Use:    "man DIR",
		Short:  "write the man pages into DIR (used by the release build)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return runError{provision.ExitFailed, err}
			}
			hdr := &doc.GenManHeader{Title: "CCO-INSTALL", Section: "8", Source: "cco " + provision.Version, Manual: "cco"}
			// A release build sets SOURCE_DATE_EPOCH: the pages are then
			// byte-for-byte reproducible.
			if sec, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
				d := time.Unix(sec, 0).UTC()
				hdr.Date = &d
			}
			root.DisableAutoGenTag = true
			if err := doc.GenManTree(root, hdr, args[0]); err != nil {
				return runError{provision.ExitFailed, err}
			}
			return nil
		},
	}
	completions := &cobra.Command{
		Use:    "completions DIR",
		Short:  "write the bash, zsh and fish completion scripts into DIR (used by the release build)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := writeCompletions(root, args[0]); err != nil {
				return runError{provision.ExitFailed, err}
			}
			return nil
		},
	}
	verifyCmd := &cobra.Command{
		Use:   "verify",
		Short: "prove the jail on this machine: a self-test battery in each installed agent's real jail (exit 3: a check failed)",
		Long: `verify runs cco's self-test battery in a real jail on this machine, through the
installed shadow (CCO_SELFTEST=1 makes the shadow start cco's probe, the
root-owned /usr/libexec/cco/sandbox-helper, instead of the vendor binary), for
each installed agent or --agent NAME, as the invoking user or, for root,
--user NAME. Each check prints its id, its verdict and its evidence in one line;
a failed one names its fix. Root's verdict is kept in
/var/lib/cco/jail-verified.json, which status reports.

Exit codes: 0 every check holds, 1 the battery could not run, 2 usage error,
3 a check failed.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.sub = "verify"
			return runE(ctx, cmd, o, sio)
		},
	}
	verifyCmd.Flags().StringVar(&o.agent, "agent", "", "verify only this agent's jail (default: every installed agent)")
	verifyCmd.Flags().StringVar(&o.user, "user", "", "run the battery as this account (root only; default: the invoking user)")
	root.AddCommand(status, config, bundle, version, verifyCmd, man, completions)
	return root
}

// runE opens the target and its configuration and runs the command.
func runE(ctx context.Context, cmd *cobra.Command, o *options, sio stdio) error {
	code, err := dispatch(ctx, cmd.Flags(), o, sio)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return err
		}
		return runError{code, err}
	}
	if code != 0 {
		return runError{code, errSilent}
	}
	return nil
}

// errSilent is a non-zero exit whose report already said why.
var errSilent = silentError{}

type silentError struct{}

func (silentError) Error() string { return "" }

func dispatch(ctx context.Context, flags *pflag.FlagSet, o *options, sio stdio) (int, error) {
	if o.root == "" {
		o.hostRoot = true
		needsRoot := o.sub == "install" && !o.dryRun
		if os.Geteuid() != 0 && needsRoot {
			return provision.ExitUsage, usageError{fmt.Sprintf("provisioning this machine needs root; run:\n  %s", asRoot(shellCommand()))}
		}
	}
	root, err := provision.OpenRoot(o.root)
	if err != nil {
		return provision.ExitFailed, err
	}
	defer root.Close()
	cfg := loadConfig(root, flags)
	for _, w := range cfg.Warnings {
		safetext.Linef(sio.errOut, "%s", w)
	}
	switch o.sub {
	case "config":
		return printConfig(cfg, o, sio.out)
	case "status":
		return status(ctx, root, cfg, o, sio.out)
	case "verify":
		return verifyJail(ctx, root, o, sio.out, sio.errOut)
	}
	if err := cfg.Err(); err != nil {
		return provision.ExitFailed, linesError{err.Error() + "\n(nothing was changed: fix the configuration, then run again)"}
	}
	if o.sub == "bundle" {
		return bundle(ctx, root, cfg, o, sio.errOut)
	}
	return install(ctx, root, cfg, o, sio)
}

// asRoot prefixes a suggested command with sudo, unless it runs as root.
func asRoot(cmd string) string {
	if provision.IsRoot() {
		return cmd
	}
	return "sudo " + cmd
}

// shellCommand re-quotes this invocation for a copy-and-paste suggestion,
// on one line.
func shellCommand() string {
	parts := []string{"cco-install"}
	for _, a := range os.Args[1:] {
		a = safetext.Escape(a)
		if strings.ContainsAny(a, " \t'\"$\\;&|<>()*?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

func install(ctx context.Context, root *provision.Root, cfg *Config, o *options, sio stdio) (int, error) {
	image := isImage(root.ReadOnly(), cfg, o)
	if o.installDeps && !o.dryRun {
		// The package manager writes its own progress to the terminal.
		if f, ok := underlying(sio.errOut).(*os.File); ok {
			if err := installDeps(root.ReadOnly(), runCommand(f)); err != nil {
				return provision.ExitFailed, err
			}
		}
	}
	if probs := preflight(root.ReadOnly(), cfg, image); len(probs) > 0 && !o.uninstall {
		var lines []string
		for _, p := range probs {
			lines = append(lines, safetext.Escape(p.String()))
		}
		return provision.ExitFailed, linesError{"refusing to start (nothing was changed):\n  " + strings.Join(lines, "\n  ")}
	}
	run, err := provision.NewRun(ctx, root)
	if err != nil {
		return provision.ExitFailed, err
	}
	run.DryRun, run.Force, run.Diff = o.dryRun, o.force, o.diff
	run.Log = sio.errOut
	// The text report lists every step once; with --json, stderr's lines
	// are the only words for people.
	run.QuietSteps = !o.json
	if o.uninstall {
		if run.Receipt.Empty() {
			// Nothing to undo, nothing to confirm, no lock to take.
			return writeReport(provision.Uninstall(run), o, sio.out)
		}
		if !o.dryRun && !o.yes && !(isTerminal(sio.in) && isTerminal(sio.errOut)) {
			return provision.ExitUsage, usageError{"--uninstall removes what cco installed, and without a terminal there is no one to ask: nothing was removed; to go ahead, run:\n  " + asRoot(shellCommand()+" --yes")}
		}
	}
	var lock *provision.Lock
	if !o.dryRun {
		if lock, err = provision.AcquireLock(run, cfg.LockTimeout); err != nil {
			return provision.ExitFailed, err
		}
		defer lock.Release() // AcquireLock re-reads the receipt once it holds the lock
	}
	if o.uninstall {
		if !o.dryRun && !o.yes {
			preview, err := provision.NewRun(ctx, root)
			if err != nil {
				return provision.ExitFailed, err
			}
			preview.DryRun = true
			provision.Uninstall(preview).WriteText(sio.errOut)
			if !confirm(sio.in, sio.errOut, "Proceed? [y/N] ") {
				return provision.ExitFailed, errors.New("stopped: the uninstall was not confirmed (pass --yes to skip the question)")
			}
		}
		if !o.dryRun {
			// Not in the receipt: they go first, so their directory can.
			root.Remove(lastUpgradePath)
			root.Remove(verify.RecordPath)
		}
		return writeReport(provision.Uninstall(run), o, sio.out)
	}
	steps, err := buildPlan(run.ReadOnly(), cfg, o)
	if err != nil {
		return provision.ExitFailed, err
	}
	if o.dryRun && !provision.IsRoot() {
		for _, n := range unreadableHomes(run.View.Root, statusUsers(run.View.Root, cfg, run.Receipt), "sudo cco-install --dry-run") {
			safetext.Linef(sio.errOut, "skipped: %s", n)
		}
	}
	if o.force && !o.dryRun && !o.yes && isTerminal(sio.in) && isTerminal(sio.errOut) {
		if !confirm(sio.in, sio.errOut, "--force replaces owned files that were edited (keeping backups). Proceed? [y/N] ") {
			return provision.ExitFailed, errors.New("stopped: --force was not confirmed (pass --yes to skip the question)")
		}
	}
	run.AfterStep = afterStep
	first := run.Receipt.Empty()
	rep := provision.Execute(run, steps)
	if len(o.upgrade) > 0 && !o.dryRun {
		recordUpgrade(root, o.upgrade, rep)
	}
	code, err := writeReport(rep, o, sio.out)
	if !o.dryRun && !image && rep.Failed == 0 && !rep.Interrupted {
		// A run that changed what the jail is made of proves it again.
		verifyAfterApply(ctx, root, changedForVerify(rep), sio.errOut)
	}
	if first && code == provision.ExitOK && err == nil && !o.dryRun && !o.json && isTerminal(sio.out) {
		nextSteps(sio.out, run.Receipt)
	}
	return code, err
}

// isImage decides image mode from the flag, the key and the target's markers.
func isImage(root provision.Reader, cfg *Config, o *options) bool {
	return o.image || cfg.String("image") == "yes" || cfg.String("image") == "auto" && inContainer(root)
}

func writeReport(rep *provision.Report, o *options, stdout io.Writer) (int, error) {
	if o.json {
		o.wrote = true
		if err := rep.WriteJSON(stdout); err != nil {
			return provision.ExitFailed, err
		}
	} else {
		rep.WriteText(stdout)
	}
	return rep.ExitCode(), nil
}

// afterStep is called after each applied step; only the test binary sets it
// (to kill the installer between steps in crash-safety tests).
var afterStep func(id string)

func isTerminal(x any) bool {
	f, ok := underlying(x).(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func confirm(stdin io.Reader, stderr io.Writer, q string) bool {
	fmt.Fprint(stderr, q)
	var ans string
	fmt.Fscanln(stdin, &ans)
	return strings.EqualFold(ans, "y") || strings.EqualFold(ans, "yes")
}
