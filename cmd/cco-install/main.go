// Command cco-install provisions a machine for cco: the shadow under every
// agent's name, the jail's helper and configuration, the guard and the
// vendors' managed policy, and the vendors' real binaries off PATH. It is
// idempotent: a second run changes nothing and says so.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/cco-dev/cco/provision"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usageError is a bad command line: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

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
	upgrade        []string
	rollback       []string
	allowDowngrade bool
	adopt          bool
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := dispatch(ctx, args, stdin, stdout, stderr)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "cco-install: %v\nrun 'cco-install --help' for usage\n", err)
			return provision.ExitUsage
		}
		fmt.Fprintf(stderr, "cco-install: %v\n", err)
		if code == 0 {
			code = provision.ExitFailed
		}
	}
	return code
}

func newFlags(sub string, o *options, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("cco-install "+sub, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.root, "root", "", "resolve every system path under this directory (stage an image, test)")
	fs.BoolVar(&o.json, "json", false, "print exactly one JSON document on stdout")
	switch sub {
	case "install":
		fs.BoolVar(&o.dryRun, "dry-run", false, "print the plan and write nothing (exit 3 if it finds conflicts)")
		fs.BoolVar(&o.diff, "diff", false, "add unified diffs of the files that would change")
		fs.BoolVar(&o.yes, "yes", false, "answer yes to prompts (no prompt is shown without a terminal)")
		fs.BoolVar(&o.force, "force", false, "replace owned files that were edited, keeping a backup under /var/lib/cco/backups")
		fs.StringSliceVar(&o.upgrade, "upgrade", nil, "fetch the newest release of the configured channel (or the pin) for claude, codex or all, and switch to it atomically")
		fs.StringSliceVar(&o.rollback, "rollback", nil, "switch claude, codex or all back to the previous installed version")
		fs.BoolVar(&o.allowDowngrade, "allow-downgrade", false, "let --upgrade move to an older release than the installed one")
		fs.BoolVar(&o.adopt, "adopt-existing", false, "use a Claude Code binary found in a user's home (the vendor's installer) instead of downloading it, when it verifies against the manifest")
		fs.BoolVar(&o.noAppArmor, "no-apparmor", false, "where AppArmor blocks bwrap's user namespaces, refuse with the fix instead of installing a profile")
		fs.BoolVar(&o.image, "image", false, "an image build: no user-namespace probe, no chown (also detected from /.dockerenv, /run/.containerenv, $container)")
		fs.BoolVar(&o.fixRC, "fix-rc", false, "remove the vendors' PATH blocks from users' shell start-up files (backups under /var/lib/cco/backups)")
		fs.BoolVar(&o.uninstall, "uninstall", false, "undo exactly what the receipt records and put relocated vendor files back")
		addConfigFlags(fs)
	case "status":
		fs.BoolVar(&o.verify, "verify", false, "re-hash every owned file instead of trusting size, mtime and inode")
	case "bundle":
		fs.StringVar(&o.out, "out", "", "the bundle to write (FILE.tar.xz)")
		addConfigFlags(fs)
	case "config":
		addConfigFlags(fs)
	}
	return fs
}

const usage = `usage:
  cco-install [--root DIR] [--dry-run] [--diff] [--json] [--force] [--yes] [flags]
  cco-install --uninstall [--root DIR] [--dry-run] [--json] [--force]
  cco-install status [--root DIR] [--json] [--verify]
  cco-install config [--root DIR] [--json]
  cco-install bundle --out FILE.tar.xz [flags]
  cco-install version

exit codes: 0 success, 1 failure, 2 usage error, 3 conflicts (or drift) left unresolved
`

func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	o := &options{sub: "install"}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		o.sub, args = args[0], args[1:]
	}
	switch o.sub {
	case "install", "status", "config", "bundle":
	case "version":
		fmt.Fprintf(stdout, "cco-install %s\n", provision.Version)
		return 0, nil
	case "help":
		fmt.Fprint(stdout, usage)
		return 0, nil
	default:
		return provision.ExitUsage, usageError{fmt.Sprintf("unknown command %q", o.sub)}
	}
	fs := newFlags(o.sub, o, stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, nil
		}
		return provision.ExitUsage, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return provision.ExitUsage, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if o.root == "" {
		o.hostRoot = true
		if os.Geteuid() != 0 && o.sub != "config" && o.sub != "bundle" && !(o.sub == "install" && o.dryRun) {
			return provision.ExitUsage, usageError{fmt.Sprintf("provisioning this machine needs root; run:\n  sudo %s", shellCommand())}
		}
	}
	root, err := provision.OpenRoot(o.root)
	if err != nil {
		return provision.ExitFailed, err
	}
	defer root.Close()
	cfg, err := loadConfig(root, fs)
	if err != nil {
		return provision.ExitFailed, err
	}
	switch o.sub {
	case "config":
		return 0, printConfig(cfg, o, stdout)
	case "status":
		return status(ctx, root, cfg, o, stdout)
	case "bundle":
		return bundle(ctx, root, cfg, o, stderr)
	}
	return install(ctx, root, cfg, o, stdin, stdout, stderr)
}

// shellCommand re-quotes this invocation for a copy-and-paste suggestion.
func shellCommand() string {
	parts := []string{"cco-install"}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " \t'\"$\\;&|<>()*?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

func install(ctx context.Context, root *provision.Root, cfg *Config, o *options, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	run, err := provision.NewRun(ctx, root)
	if err != nil {
		return provision.ExitFailed, err
	}
	run.DryRun, run.Force, run.Diff = o.dryRun, o.force, o.diff
	run.Log = stderr
	var lock *provision.Lock
	if !o.dryRun {
		if lock, err = provision.AcquireLock(run, cfg.LockTimeout); err != nil {
			return provision.ExitFailed, err
		}
		defer lock.Release() // AcquireLock re-reads the receipt once it holds the lock
	}
	if o.uninstall {
		return writeReport(provision.Uninstall(run), o, stdout)
	}
	steps, err := buildPlan(run, cfg, o)
	if err != nil {
		return provision.ExitFailed, err
	}
	if o.force && !o.dryRun && !o.yes && isTerminal(stdin) && isTerminal(stderr) {
		if !confirm(stdin, stderr, "--force replaces owned files that were edited (keeping backups). Go on? [y/N] ") {
			return provision.ExitFailed, errors.New("stopped: --force was not confirmed (pass --yes to skip the question)")
		}
	}
	run.AfterStep = afterStep
	return writeReport(provision.Execute(run, steps), o, stdout)
}

func writeReport(rep *provision.Report, o *options, stdout io.Writer) (int, error) {
	if o.json {
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
	f, ok := x.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func confirm(stdin io.Reader, stderr io.Writer, q string) bool {
	fmt.Fprint(stderr, q)
	var ans string
	fmt.Fscanln(stdin, &ans)
	return strings.EqualFold(ans, "y") || strings.EqualFold(ans, "yes")
}
