package guard

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// pathEnv is the PATH the gate diagnoses. It only shapes the message: the
// decision never reads the environment.
var pathEnv = func() string { return os.Getenv("PATH") }

// gate is the UserPromptSubmit decision: allow inside a jail, block outside
// unless the operator's escape hatch turns the block into a warning.
func gate(agent string, stdout, stderr io.Writer) int {
	_, err := probeJail()
	if err == nil {
		// Inside: say nothing. Both agents add exit-0 stdout to the model's
		// context, which is no place for the guard's chatter.
		return 0
	}
	why := outsideReason(agent, err)
	allowed, hatchErr := escapeHatch()
	if allowed {
		systemMessage(stdout, "cco guard: WARNING: "+why+" Prompts are allowed only because "+AllowUnwrappedPath+
			" exists: this agent has the run of your account. Remove that file to restore the block.")
		return 0
	}
	msg := "cco guard: blocked: " + why
	if hatchErr != nil {
		msg += " (" + hatchErr.Error() + ")"
	}
	// Codex treats exit 2 as a block only with a non-empty stderr; this
	// always has one.
	fmt.Fprintln(stderr, msg)
	return 2
}

// outsideReason says why the agent is unconfined and what fixes it.
func outsideReason(agent string, probeErr error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "this %s is not running inside a cco jail (%v), so it can reach everything your account can. ", agent, probeErr)
	b.WriteString(diagnosePath(agent))
	return b.String()
}

// diagnosePath names the fix: the shadow missing, the shadow shadowed on
// PATH, or an agent started some other way than through PATH.
func diagnosePath(agent string) string {
	shadow := ShadowDir + "/" + agent
	if !executable(shadow) {
		return fmt.Sprintf("The cco wrapper %s is missing: reinstall it with `sudo cco-install`, then start `%s` again.", shadow, agent)
	}
	first, onPath := lookPath(agent)
	switch {
	case first == "" || !onPath:
		return fmt.Sprintf("%s is not on your PATH: add it (ahead of ~/.local/bin) and start `%s` again.", ShadowDir, agent)
	case first != shadow:
		return fmt.Sprintf("`%s` on your PATH is %s, which comes before the cco wrapper %s: remove %s (or put %s first on PATH), then start `%s` again.",
			agent, first, shadow, first, ShadowDir, agent)
	}
	return fmt.Sprintf("`%s` on your PATH is the cco wrapper, so this agent was started another way (a full path to the vendor's binary, an IDE, a script): start it as `%s` from %s.", agent, agent, ShadowDir)
}

// lookPath finds the first executable name on PATH, and reports whether
// ShadowDir is on PATH at all.
func lookPath(name string) (first string, shadowOnPath bool) {
	for _, dir := range filepath.SplitList(pathEnv()) {
		if !filepath.IsAbs(dir) {
			continue // a relative PATH entry depends on the cwd; the agents' hooks run in the workspace
		}
		dir = filepath.Clean(dir)
		if dir == ShadowDir {
			shadowOnPath = true
		}
		if p := dir + "/" + name; first == "" && executable(p) {
			first = p
		}
	}
	return first, shadowOnPath
}

func executable(target string) bool {
	fi, err := os.Stat(filepath.Join(sysRoot, target))
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// escapeHatch reports whether the operator's flag file allows unwrapped use.
// Only a root-owned regular file, in a directory only root can write, counts:
// no user can create such a file, so the hatch cannot be forged from inside
// an account. Anything else is ignored, with a reason.
func escapeHatch() (bool, error) {
	fi, err := os.Lstat(hatchPath)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s ignored: %w", AllowUnwrappedPath, err)
	}
	if !fi.Mode().IsRegular() {
		return false, fmt.Errorf("%s ignored: it is not a regular file", AllowUnwrappedPath)
	}
	if uid, ok := Owner(fi); !ok || uid != 0 {
		return false, fmt.Errorf("%s ignored: it is owned by uid %d, not root", AllowUnwrappedPath, uid)
	}
	di, err := os.Stat(filepath.Dir(hatchPath))
	if err != nil {
		return false, fmt.Errorf("%s ignored: %w", AllowUnwrappedPath, err)
	}
	if uid, ok := Owner(di); !ok || uid != 0 || di.Mode().Perm()&0o022 != 0 {
		return false, fmt.Errorf("%s ignored: its directory is not root's alone (uid %d, mode %04o)", AllowUnwrappedPath, uid, di.Mode().Perm())
	}
	return true, nil
}

// Owner is fi's owning uid (false where the file system says none).
func Owner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}
