package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// viewParams are the rootview mode's own parameters, from the same JSON.
type viewParams struct {
	Secrets []string `json:"secrets"` // host paths the jail must not read (files read, directories listed)
	Git     string   `json:"git"`     // a repository in the workspace, for git status and commit
}

// rootviewProbe reports what root's view of the host lets the agent do:
// read the given secrets, write the workspace and the login state, use
// git, and as whom.
func rootviewProbe() {
	var v viewParams
	for i, a := range os.Args {
		if a == "probe" && i+1 < len(os.Args) {
			json.Unmarshal([]byte(os.Args[i+1]), &v)
		}
	}
	for i, s := range v.Secrets {
		k := "secret_" + strconv.Itoa(i)
		if fi, err := os.Stat(s); err != nil {
			report[k] = res(err)
		} else if fi.IsDir() {
			_, err = os.ReadDir(s)
			report[k] = res(err)
		} else {
			_, err = os.ReadFile(s)
			report[k] = res(err)
		}
	}
	wd, _ := os.Getwd()
	home := os.Getenv("HOME")
	report["uid"], report["gid"] = strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	report["write_ws"] = res(os.WriteFile(filepath.Join(wd, "made-in-jail"), []byte("jail"), 0o644))
	report["mkdir_ws"] = res(os.Mkdir(filepath.Join(wd, "dir-made-in-jail"), 0o755))
	if fi, err := os.Stat(wd); err == nil {
		report["ws_owner"] = strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid))
	}
	login := filepath.Join(home, ".claude")
	if _, err := os.Stat(filepath.Join(home, ".codex/auth.json")); err == nil {
		login = filepath.Join(home, ".codex")
	}
	report["write_login"] = res(os.WriteFile(filepath.Join(login, "made-in-jail"), []byte("jail"), 0o600))
	for _, f := range []string{".claude/.credentials.json", ".codex/auth.json"} {
		if b, err := os.ReadFile(filepath.Join(home, f)); err == nil {
			report["read_login"] = string(b)
		}
	}
	if v.Git != "" {
		git := func(k string, args ...string) {
			c := exec.Command("git", append([]string{"-C", v.Git, "-c", "user.name=Jail", "-c", "user.email=jail@example.org"}, args...)...)
			out, err := c.CombinedOutput()
			report[k] = strings.TrimSpace(string(out))
			if err != nil {
				report[k] += " (" + err.Error() + ")"
				report[k+"_ok"] = "no"
			} else {
				report[k+"_ok"] = "yes"
			}
		}
		os.WriteFile(filepath.Join(v.Git, "tracked"), []byte("from the jail\n"), 0o644)
		git("git_status", "status", "--porcelain")
		git("git_add", "add", "tracked")
		git("git_commit", "commit", "-q", "-m", "from the jail")
		git("git_log", "log", "--format=%s", "-1")
	}
	b, _ := json.Marshal(report)
	os.Stdout.Write(b)
	os.Exit(0)
}
