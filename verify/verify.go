// Package verify proves the jail on this machine: it plants sentinels and
// listeners on the host, launches the installed shadow under an agent's name
// with CCO_SELFTEST=1 (so the shadow builds the agent's real jail and starts
// cco's probe in it instead of the vendor binary), and judges the probe's
// report together with what the host saw (a sink that must stay untouched,
// the guard outside the jail). `cco-install verify` is its front door.
package verify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/selftest"
)

// Schema is the version of the verify document (Result) and of the record.
const Schema = 1

// User is whom a battery runs as.
type User struct {
	Name     string
	UID, GID int
	Home     string
}

// Target is one battery: an agent, run as a user, through a shadow.
type Target struct {
	Agent *agent.Profile
	User  User
	// Shadow is the host path of the shadow under the agent's name.
	Shadow string
	// GateScript is the host path of the prompt gate, for the guard's
	// check outside the jail; "" for an agent with no guard.
	GateScript string
	// OtherHomes are other users' homes, which the jail must not list.
	OtherHomes []string
	// Timeout bounds the launch; 0 is one minute.
	Timeout time.Duration
	// Reinstall is the command that puts the shadow back ("sudo
	// cco-install", or with --force where the installed file was edited).
	Reinstall string
}

// Check is one verdict, with the agent and user it is of.
type Check struct {
	Agent string `json:"agent"`
	User  string `json:"user"`
	selftest.Check
}

// Battery is one target's outcome.
type Battery struct {
	Checks []Check
	Engine string
	Layers []string
	Kernel string
}

// ErrCannotRun marks a battery that could not run at all (exit 1), as
// against one whose checks failed (exit 3).
var ErrCannotRun = errors.New("the battery could not run")

func nonce() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	}
	return hex.EncodeToString(b[:])
}

// planted tracks what a battery made on the host, to remove it after.
type planted struct {
	files, dirs []string // dirs: made by the battery, removed when empty
}

func (p *planted) undo() {
	for i := len(p.files) - 1; i >= 0; i-- {
		os.Remove(p.files[i])
	}
	for i := len(p.dirs) - 1; i >= 0; i-- {
		os.Remove(p.dirs[i])
	}
}

// mkdirOwned makes dir (and the missing directories above it, up to the
// home) for u, recording what it made.
func (p *planted) mkdirOwned(dir string, u User, stop string) error {
	if fi, err := os.Lstat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != stop && parent != dir {
		if err := p.mkdirOwned(parent, u, stop); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	p.dirs = append(p.dirs, dir)
	return os.Lchown(dir, u.UID, u.GID)
}

// plant writes a sentinel holding n at path, owned by u: the jail, not the
// file's mode, must keep it out.
func (p *planted) plant(path, n string, u User) error {
	if err := p.mkdirOwned(filepath.Dir(path), u, u.Home); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	p.files = append(p.files, path)
	_, err = f.WriteString("cco verify sentinel " + n + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Lchown(path, u.UID, u.GID)
	}
	return err
}

// sink is a listener that counts who reached it.
type sink struct {
	ln   net.Listener
	hits atomic.Int64
}

func listen(network, addr string) (*sink, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	s := &sink{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.hits.Add(1)
			c.Close()
		}
	}()
	return s, nil
}

func (s *sink) close() { s.ln.Close() }

// Run runs one battery. An error wrapping ErrCannotRun means no verdict
// could be had; otherwise the checks say what holds.
func Run(ctx context.Context, t Target) (*Battery, error) {
	p := t.Agent
	u := t.User
	n := nonce()
	pl := &planted{}
	defer pl.undo()

	ws := filepath.Join(u.Home, ".cco-verify-"+n)
	if err := pl.mkdirOwned(ws, u, u.Home); err != nil {
		return nil, fmt.Errorf("%w: making the workspace %s: %v", ErrCannotRun, ws, err)
	}
	defer os.RemoveAll(ws)

	req := &selftest.Request{Schema: selftest.Schema, Agent: p.Name, Nonce: n, Workspace: ws,
		Secrets: map[string]string{}, HiddenDirs: map[string]string{}, GateScript: t.GateScript}
	secrets := map[string]string{
		"secrets.ssh": filepath.Join(u.Home, ".ssh", "cco-verify-"+n),
		"secrets.aws": filepath.Join(u.Home, ".aws", "cco-verify-"+n),
	}
	if other := otherLogin(p); other != "" {
		secrets["secrets.other_agent"] = filepath.Join(u.Home, other, "cco-verify-"+n)
	}
	for id, path := range secrets {
		if err := pl.plant(path, n, u); err != nil {
			return nil, fmt.Errorf("%w: planting the sentinel %s: %v", ErrCannotRun, path, err)
		}
		req.Secrets[id] = path
	}
	for i, h := range t.OtherHomes {
		req.HiddenDirs[fmt.Sprintf("secrets.other_user.%d", i+1)] = h
	}
	req.ReadOnly = readOnlyDirs(u.Home)

	sockPath := filepath.Join(os.TempDir(), "cco-verify-"+n+".sock")
	us, err := listen("unix", sockPath)
	if err != nil {
		return nil, fmt.Errorf("%w: a listener at %s: %v", ErrCannotRun, sockPath, err)
	}
	defer us.close()
	defer os.Remove(sockPath)
	os.Chmod(sockPath, 0o777) // only the jail may keep the user out
	abstract := "cco-verify-" + n
	as, err := listen("unix", "@"+abstract)
	if err != nil {
		return nil, fmt.Errorf("%w: an abstract listener: %v", ErrCannotRun, err)
	}
	defer as.close()
	refused, err := listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%w: a loopback sink: %v", ErrCannotRun, err)
	}
	defer refused.close()
	req.UnixSocket, req.Abstract, req.Refused = sockPath, abstract, refused.ln.Addr().String()

	out, stderr, runErr := launch(ctx, t, ws, req)
	b := &Battery{}
	add := func(c selftest.Check) { b.Checks = append(b.Checks, Check{Agent: p.Name, User: u.Name, Check: c}) }
	rep, perr := selftest.ParseReport(out, n)
	if perr != nil {
		why := perr.Error()
		if runErr != nil {
			why += " (" + runErr.Error() + ")"
		}
		if s := lastLine(stderr); s != "" {
			why += ": " + s
		}
		reinstall := t.Reinstall
		if reinstall == "" {
			reinstall = "sudo cco-install"
		}
		fix := fmt.Sprintf("run `%s` to put cco's shadow back at %s, then `cco-install verify` again", reinstall, t.Shadow)
		add(selftest.Check{ID: "probe", Detail: fmt.Sprintf("%s did not start cco's probe in a jail: %s", t.Shadow, why), Fix: fix})
		// Every check the jail answers fails with it: nothing proves them.
		for _, id := range sortedIDs(req) {
			add(selftest.Check{ID: id, Detail: "no report from a jail: " + t.Shadow + " did not build one", Fix: fix})
		}
	} else {
		add(selftest.Check{ID: "probe", OK: true, Detail: t.Shadow + " started cco's probe in " + p.Name + "'s jail"})
		b.Engine, b.Layers, b.Kernel = rep.Engine, rep.Layers, rep.Kernel
		for _, c := range rep.Checks {
			c.Fix = fixFor(c)
			// The host's side of the listeners' checks: a connection that
			// reached one fails it, whatever the probe said.
			switch {
			case c.ID == "socket.path" && us.hits.Load() > 0,
				c.ID == "socket.abstract" && as.hits.Load() > 0,
				c.ID == "egress.refused" && refused.hits.Load() > 0:
				c.OK, c.Detail = false, c.Detail+"; the host's listener was reached"
			}
			add(c)
		}
	}
	if t.GateScript != "" {
		add(guardOutside(ctx, t, ws))
	}
	return b, nil
}

// sortedIDs are the checks a report would hold for req.
func sortedIDs(req *selftest.Request) []string {
	var ids []string
	for id := range req.Secrets {
		ids = append(ids, id)
	}
	for id := range req.HiddenDirs {
		ids = append(ids, id)
	}
	ids = append(ids, "write.workspace", "write.outside", "capabilities", "no_new_privs", "seccomp",
		"tiocsti", "tioclinux", "userns", "socket.path", "socket.abstract", "egress.refused")
	if req.GateScript != "" {
		ids = append(ids, "guard.inside")
	}
	return ids
}

// otherLogin is another agent's login directory, relative to the home.
func otherLogin(p *agent.Profile) string {
	mine := map[string]bool{}
	for _, l := range p.Login {
		mine[l] = true
	}
	for _, name := range agent.Names() {
		o, _ := agent.Lookup(name)
		if o == nil || o.Name == p.Name || len(o.Login) == 0 {
			continue
		}
		if l := o.Login[0]; !mine[l] && !strings.HasPrefix(l, ".cache") {
			return l
		}
	}
	return ""
}

// readOnlyDirs are directories outside the workspace, the login state and
// the caches where nothing may be created.
func readOnlyDirs(home string) []string {
	dirs := []string{"/", "/etc", "/usr", "/usr/local/bin", "/var", "/opt", "/srv", home}
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// launch runs the shadow as the agent, in ws, with the probe's request.
func launch(ctx context.Context, t Target, ws string, req *selftest.Request) (stdout, stderr []byte, err error) {
	arg, err := jsonArg(req)
	if err != nil {
		return nil, nil, err
	}
	to := t.Timeout
	if to == 0 {
		to = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.Shadow, arg)
	cmd.Dir = ws
	cmd.Env = userEnv(t.User, selftest.Env+"=1")
	cmd.SysProcAttr = credential(t.User)
	var o, e capped
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.Bytes(), e.Bytes(), err
}

// userEnv is the plain environment of a login of u: nothing of the
// verifier's own.
func userEnv(u User, extra ...string) []string {
	env := []string{"HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name,
		"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	return append(env, extra...)
}

func credential(u User) *syscall.SysProcAttr {
	if os.Geteuid() != 0 || u.UID == 0 {
		return nil
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}}}
}

// guardOutside runs the prompt gate on the host, as the vendor's binary
// started outside the jail would: it must block.
func guardOutside(ctx context.Context, t Target, ws string) selftest.Check {
	c := selftest.Check{ID: "guard.outside"}
	cmd := exec.CommandContext(ctx, "/bin/sh", t.GateScript, t.Agent.Name)
	cmd.Dir = ws
	cmd.Env = userEnv(t.User)
	cmd.SysProcAttr = credential(t.User)
	cmd.Stdin = strings.NewReader(`{"session_id":"cco-verify","hook_event_name":"UserPromptSubmit","cwd":"` + ws + `","prompt":"cco verify"}`)
	var e capped
	cmd.Stderr = &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == 2:
		c.OK, c.Detail = true, t.GateScript+" blocks "+t.Agent.Name+" started outside the jail"
	case err == nil:
		c.Detail = t.GateScript + " lets a prompt through outside the jail"
		c.Fix = "remove /etc/cco/allow-unwrapped if it exists, and run `sudo cco-install`"
	default:
		c.Detail = fmt.Sprintf("%s did not answer as the guard does: %v", t.GateScript, err)
		c.Fix = "run `sudo cco-install` to put the guard back"
	}
	return c
}

// fixFor names the fix of a failed check from inside the jail.
func fixFor(c selftest.Check) string {
	if c.OK {
		return ""
	}
	switch {
	case strings.HasPrefix(c.ID, "secrets."), strings.HasPrefix(c.ID, "write."):
		return "check hide, allow_write and home_read_only in /etc/cco/sandbox.toml (`cco-install config`), then run `sudo cco-install`"
	case strings.HasPrefix(c.ID, "egress."):
		return "check egress, egress_allow and allow_ip in /etc/cco/sandbox.toml, then run `sudo cco-install`"
	case c.ID == "guard.inside":
		return "run `sudo cco-install` to put the guard and the helper back"
	}
	return "reinstall with `sudo cco-install`: the jail this host builds is not cco's (run `cco-install status` for what changed)"
}

func jsonArg(req *selftest.Request) (string, error) {
	b, err := json.Marshal(req)
	return string(b), err
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// capped keeps the first MiB of a stream.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := 1<<20 - c.Len(); room > 0 {
		if len(p) > room {
			c.Buffer.Write(p[:room])
		} else {
			c.Buffer.Write(p)
		}
	}
	return len(p), nil
}

// OtherHomes lists the homes of other login users than u (uid 1000 and up,
// an existing directory), from /etc/passwd.
func OtherHomes(passwd []byte, u User) []string {
	var out []string
	for _, line := range strings.Split(string(passwd), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 {
			continue
		}
		var uid int
		if _, err := fmt.Sscanf(f[2], "%d", &uid); err != nil || uid < 1000 || uid == 65534 || uid == u.UID {
			continue
		}
		h := f[5]
		if h == "" || h == u.Home || !filepath.IsAbs(h) {
			continue
		}
		if fi, err := os.Stat(h); err == nil && fi.IsDir() {
			out = append(out, h)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue
		}
	}
	return out
}

// CheckIDs are every check a battery reports, as docs/reference/verify.md
// lists them (secrets.other_user.N is one per other user's home).
var CheckIDs = []string{"probe", "secrets.ssh", "secrets.aws", "secrets.other_agent", "secrets.other_user.N",
	"write.workspace", "write.outside", "capabilities", "no_new_privs", "seccomp", "tiocsti", "tioclinux", "userns",
	"socket.path", "socket.abstract", "egress.refused", "egress.allowed", "guard.inside", "guard.outside"}
