package workspace

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The host's git, run by the shadow on one repository or file at a time.

// gitTimeout bounds a git the shadow runs on a file the user or a session
// wrote.
const gitTimeout = 5 * time.Second

// gitEnv is the environment of a git the shadow runs: no system or global
// configuration, so that only the file asked about is read.
var gitEnv = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=/nonexistent", "PATH=/usr/bin:/bin", "LC_ALL=C"}

// GitConfigList is the repository's configuration as git reads it, with
// includes, one key=value a line (keys in git's own lowered form).
func GitConfigList(gitdir string) []string {
	out := runGit("--git-dir="+gitdir, "config", "--includes", "--list", "--local")
	return strings.Split(strings.TrimSpace(out), "\n")
}

// GitConfigGet is one key of a config file, as git reads it ("" if unset,
// or not a regular file: a FIFO would hold git until its timeout).
func GitConfigGet(file, key string) string {
	if fi, err := os.Lstat(file); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return strings.TrimSpace(runGit("config", "--file", file, "--get", key))
}

func runGit(args ...string) string {
	g := hostGit()
	if g == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, g, args...)
	c.Dir, c.Env, c.WaitDelay = "/", gitEnv, time.Second
	out, err := c.Output()
	if err != nil {
		return ""
	}
	return string(out)
}
