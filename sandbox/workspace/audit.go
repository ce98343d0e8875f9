package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cco-dev/cco/internal/safetext"
	"github.com/cco-dev/cco/sandbox/saferead"
)

// The post-session audit of a workspace's repositories. At launch it takes
// a stat of each config, hook and redirect file of each repository Find
// sees, reading only the small files that say where git directories lie
// (.git files, commondir) and listing hooks directories, capped; no
// program runs: the launch waits for it. After the session it walks again, and for each such file that is
// new or not the one it was, the shadow prints one warning naming it and
// what git would run from it. Only a changed config is handed to the
// host's git, which lists its keys itself (with includes), so no form git
// accepts is missed.

// gitFileKind is the part one file plays for git.
type gitFileKind int

const (
	kindConfig   gitFileKind = iota // config, config.worktree
	kindHook                        // a file in hooks/ (or core.hooksPath)
	kindRedirect                    // a .git file, commondir: where git finds the repository
)

// fileStamp tells a file apart from its replacement or a write to it.
// ctime is in it because no call that changes a file can set it back.
type fileStamp struct {
	dev, ino    uint64
	mode        uint32
	size        int64
	mtime, ctim syscall.Timespec
}

func stampOf(p string) (fileStamp, bool) {
	var st syscall.Stat_t
	if syscall.Lstat(p, &st) != nil {
		return fileStamp{}, false
	}
	return fileStamp{uint64(st.Dev), st.Ino, st.Mode, st.Size, st.Mtim, st.Ctim}, true
}

// repoFiles is a snapshot: each file's kind and stamp.
type repoFiles map[string]repoFile

type repoFile struct {
	kind  gitFileKind
	stamp fileStamp
}

// snapshotRepos stamps the git files of repos (FindRepos's entries).
func snapshotRepos(repos []string) repoFiles {
	out := repoFiles{}
	for _, e := range repos {
		gitFilesOf(e, func(p string, k gitFileKind) {
			if st, ok := stampOf(p); ok {
				out[p] = repoFile{k, st}
			}
		})
	}
	return out
}

// gitFilesOf calls fn with every file through which git takes
// configuration or a program from the repository entry e (a git directory
// or a .git file): the .git file and its target's, the commondir and the
// common directory's config and hooks. A link is named, never followed.
func gitFilesOf(e string, fn func(string, gitFileKind)) {
	admin := e
	if fi, err := os.Lstat(e); err != nil {
		return
	} else if !fi.IsDir() {
		fn(e, kindRedirect)
		admin = gitdirOf(e)
		if admin == "" {
			return
		}
	}
	dirs := []string{admin}
	fn(filepath.Join(admin, "commondir"), kindRedirect)
	if c := commonDirOf(admin); c != "" && c != admin {
		dirs = append(dirs, c)
	}
	for _, d := range dirs {
		fn(filepath.Join(d, "config"), kindConfig)
		fn(filepath.Join(d, "config.worktree"), kindConfig)
		hooksIn(filepath.Join(d, "hooks"), fn)
	}
}

// hooksIn calls fn with each file of a hooks directory but git's own
// samples (which git never runs).
func hooksIn(dir string, fn func(string, gitFileKind)) {
	for _, h := range (&repoFinder{}).list(dir) {
		if !strings.HasSuffix(h.name, ".sample") {
			fn(filepath.Join(dir, h.name), kindHook)
		}
	}
}

// gitdirOf is the git directory a .git file names ("" if none).
func gitdirOf(gitFile string) string {
	b, err := saferead.ReadCapped(gitFile)
	if err != nil {
		return ""
	}
	p, ok := strings.CutPrefix(strings.TrimSpace(firstLine(b)), "gitdir:")
	if !ok {
		return ""
	}
	return relTo(filepath.Dir(gitFile), strings.TrimSpace(p))
}

// commonDirOf is the common directory a git directory's commondir names
// ("" if none).
func commonDirOf(admin string) string {
	b, err := saferead.ReadCapped(filepath.Join(admin, "commondir"))
	if err != nil {
		return ""
	}
	return relTo(admin, strings.TrimSpace(firstLine(b)))
}

func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func relTo(dir, p string) string {
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p)
}

// Bounds of the git runs after a session: a config that includes a FIFO
// or /dev/zero must not hold the session's end.
const (
	gitListTimeout = 2 * time.Second
	gitAuditBudget = 5 * time.Second
)

// gitPrograms are where the host's git is looked for: system paths only,
// never the user's PATH (a workspace's bin directory may be on it).
var gitPrograms = []string{"/usr/bin/git", "/bin/git", "/usr/local/bin/git"}

// repoWarnings compares the git files of the workspace's repositories now
// with the snapshot, and says, one line per file, what a new or changed
// one makes git run on the host.
func repoWarnings(before repoFiles, repos []string) (out []string) {
	type changed struct {
		path string
		kind gitFileKind
		st   fileStamp
	}
	var ch []changed
	seen := map[string]bool{}
	for _, e := range repos {
		gitFilesOf(e, func(p string, k gitFileKind) {
			st, ok := stampOf(p)
			if !ok || seen[p] {
				return
			}
			seen[p] = true
			if b, was := before[p]; !was || b.stamp != st {
				ch = append(ch, changed{p, k, st})
			}
		})
	}
	if len(ch) == 0 {
		return nil
	}
	if len(ch) > maxRepoWarnings {
		n := len(ch) - maxRepoWarnings
		ch = ch[:maxRepoWarnings]
		defer func() {
			out = append(out, fmt.Sprintf("%d more git files were created or changed in this session; check the workspace's repositories before running git there", n))
		}()
	}
	sort.Slice(ch, func(i, j int) bool { return ch[i].path < ch[j].path })
	l := newGitLister()
	for _, c := range ch {
		p := safetext.Escape(c.path)
		switch {
		case c.kind == kindHook:
			out = append(out, p+": a git hook, created or changed in this session; git runs it on the host")
		case c.st.mode&syscall.S_IFMT == syscall.S_IFLNK:
			t, _ := os.Readlink(c.path)
			out = append(out, fmt.Sprintf("%s: made a link to %s in this session; git reads what it names", p, safetext.Escape(t)))
		case c.st.mode&syscall.S_IFMT != syscall.S_IFREG:
			out = append(out, p+": made in this session, and not a regular file; git reads it")
		case c.kind == kindRedirect:
			b, _ := saferead.ReadCapped(c.path)
			out = append(out, fmt.Sprintf("%s: created or changed in this session; it points git at %s", p, safetext.Escape(strings.TrimSpace(firstLine(b)))))
		default:
			keys, err := l.runKeys(c.path)
			if err != nil {
				out = append(out, fmt.Sprintf("%s: a git config changed in this session that git could not list (%v); check it before running git there", p, err))
			} else if len(keys) > 0 {
				out = append(out, fmt.Sprintf("%s: a git config changed in this session sets keys that run programs: %s", p, strings.Join(keys, ", ")))
				// A hooks directory the config names is reported file by file.
				for _, k := range keys {
					if d := hooksPathOf(c.path, k); d != "" {
						n := 0
						hooksIn(d, func(h string, _ gitFileKind) {
							if n++; n <= maxRepoWarnings {
								out = append(out, safetext.Escape(h)+": a git hook in core.hooksPath; git runs it on the host")
							}
						})
						if n > maxRepoWarnings {
							out = append(out, fmt.Sprintf("%d more files in %s, which core.hooksPath names; git runs them on the host", n-maxRepoWarnings, safetext.Escape(d)))
						}
					}
				}
			}
		}
	}
	return out
}

// maxRepoWarnings bounds what one session's end prints: a session that
// planted thousands of hooks gets a count for the rest.
const maxRepoWarnings = 32

// hooksPathOf is the directory a core.hooksPath key (as runKeys gives it)
// of the config file names: absolute, or relative to the work tree of a
// .git directory; "" for another key or a form it cannot place.
func hooksPathOf(config, key string) string {
	v, ok := strings.CutPrefix(key, "core.hookspath=")
	if !ok {
		return ""
	}
	d, err := strconv.Unquote(v)
	switch {
	case err != nil || d == "" || strings.HasPrefix(d, "~"):
		return ""
	case filepath.IsAbs(d):
		return filepath.Clean(d)
	case filepath.Base(filepath.Dir(config)) == ".git":
		return filepath.Join(filepath.Dir(filepath.Dir(config)), d)
	}
	return ""
}

// gitLister runs the host's git on one config file at a time, in gitEnv
// (no system or global file), so that only that file and what it includes
// is read, and within the audit's time budget.
type gitLister struct {
	git   string
	until time.Time
}

func newGitLister() *gitLister {
	return &gitLister{git: hostGit(), until: time.Now().Add(gitAuditBudget)}
}

// hostGit is the first of gitPrograms that is there, or "".
func hostGit() string {
	for _, g := range gitPrograms {
		if fi, err := os.Stat(g); err == nil && fi.Mode().IsRegular() {
			return g
		}
	}
	return ""
}

// runKeys lists the keys of a config file (with what it includes) that
// make git run a program, as key=value with the value quoted.
func (l *gitLister) runKeys(file string) ([]string, error) {
	if l.git == "" {
		return nil, errors.New("git is not installed at " + strings.Join(gitPrograms, ", "))
	}
	left := time.Until(l.until)
	if left <= 0 {
		return nil, errors.New("the audit's time ran out")
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(left, gitListTimeout))
	defer cancel()
	c := exec.CommandContext(ctx, l.git, "config", "--file", file, "--list", "--includes", "-z")
	// Run from /, where no repository is found: only the file and its
	// includes are read.
	c.Dir = "/"
	c.Env = gitEnv
	var stdout cappedBuffer
	var stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	c.WaitDelay = time.Second
	err := c.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("git took longer than %v: it may include a FIFO or a device", min(left, gitListTimeout))
	}
	if stdout.over {
		return nil, fmt.Errorf("git listed more than %d bytes", saferead.MaxStateFile)
	}
	if err != nil {
		msg := strings.TrimSpace(firstLine(stderr.Bytes()))
		if msg == "" {
			msg = err.Error()
		}
		return nil, errors.New(safetext.Escape(msg))
	}
	var out []string
	for _, ent := range bytes.Split(stdout.Bytes(), []byte{0}) {
		k, v, _ := strings.Cut(string(ent), "\n")
		if k != "" && gitRunKey(k, v) {
			out = append(out, k+"="+strconv.Quote(v))
		}
	}
	return out, nil
}

// cappedBuffer keeps at most saferead.MaxStateFile bytes; more marks it over.
type cappedBuffer struct {
	bytes.Buffer
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > saferead.MaxStateFile {
		b.over = true
		return 0, errors.New("too much output")
	}
	return b.Buffer.Write(p)
}

// gitRunNames are the last parts of git configuration keys whose values
// git runs, or that point it at something it runs (core.hooksPath).
var gitRunNames = map[string]bool{
	"hookspath": true, "fsmonitor": true, "sshcommand": true, "editor": true, "pager": true, "askpass": true,
	"clean": true, "smudge": true, "process": true, "textconv": true, "command": true, "cmd": true, "helper": true,
	"proxy": true, "gitproxy": true, "receivepack": true, "uploadpack": true, "program": true, "driver": true,
	"packobjectshook": true, "alternaterefscommand": true, "defaultkeycommand": true, "sendmailcmd": true,
	"smtpserver": true, "external": true,
}

// gitRunSections are sections every key of which makes git run something
// or read another file: includes, filters, pagers.
var gitRunSections = map[string]bool{"include": true, "includeif": true, "filter": true, "pager": true}

// gitRunKey reports whether a key as git lists it (section and name in
// lower case) makes git run a program: the sections above, an alias
// starting with "!", and the names above in any section (diff.external,
// diff.*.textconv, merge.*.driver, credential.helper, gpg.*.program, ...).
func gitRunKey(key, value string) bool {
	key = strings.ToLower(key)
	section, _, _ := strings.Cut(key, ".")
	name := key[strings.LastIndexByte(key, '.')+1:]
	switch {
	case gitRunSections[section]:
		return true
	case section == "alias":
		return strings.HasPrefix(strings.TrimSpace(value), "!")
	}
	return gitRunNames[name]
}

// protectedStamp is a protected path's inode at the session's start.
type protectedStamp struct {
	path     string
	dev, ino uint64
}

// Protected are the inodes of the protected paths at the session's start.
type Protected []protectedStamp

// StampProtected records the inode of each protected path that exists
// (the placeholders exist by now).
func StampProtected(paths []string) Protected {
	var out Protected
	for _, p := range paths {
		if st, ok := stampOf(p); ok {
			out = append(out, protectedStamp{p, st.dev, st.ino})
		}
	}
	return out
}

// Tampered lists each protected path that no longer names the inode it
// named when the session started, or is gone: something replaced,
// renamed or removed what the jail protected.
func (ps Protected) Tampered() []string {
	var out []string
	for _, p := range ps {
		if st, ok := stampOf(p.path); !ok || st.dev != p.dev || st.ino != p.ino {
			out = append(out, safetext.Escape(p.path))
		}
	}
	return out
}

// Snapshot is what the audit compares after the session: the git files of
// the workspace's repositories, the files host tools load (with what they
// ran at launch) and the agent config in its subdirectories.
type Snapshot struct {
	ws      string
	repos   repoFiles
	sourced map[string]loaded
	agent   map[string]fileStamp
}

// Take snapshots, at launch, the git files of the repositories Find
// found in the workspace ws, the files host tools load there, in each
// repository's top and in the directories Find found holding one, and the
// agent config in those holding some. ws is "" for a launch with no
// workspace: there is nothing to audit then.
func Take(ws string, repos, dirs []string) *Snapshot {
	if ws == "" {
		return nil
	}
	return &Snapshot{ws: ws, repos: snapshotRepos(repos),
		sourced: snapshotSourced(sourcedDirs(ws, repos, dirs)),
		agent:   stampsOf(func(fn func(string)) { eachAgentConfig(dirs, fn) })}
}

// Warnings walks the workspace again after the session and lists, one line
// each, what git would run from a config, hook or redirect created or
// changed in its repositories (repoWarnings), what a host tool runs from a
// file it loads that the session created or changed (sourcedWarnings), and
// the agent config made or changed in a subdirectory.
func (s *Snapshot) Warnings() []string {
	if s == nil {
		return nil
	}
	repos, dirs := Find(s.ws)
	out := append(repoWarnings(s.repos, repos), sourcedWarnings(s.sourced, sourcedDirs(s.ws, repos, dirs))...)
	return append(out, changedSince(s.agent, func(fn func(string)) { eachAgentConfig(dirs, fn) }, agentConfigWhy)...)
}
