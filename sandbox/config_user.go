package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/internal/safetext"
	"github.com/cco-dev/cco/internal/suggest"
	"github.com/cco-dev/cco/sandbox/caches"
	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// UserConfigRel is a user's own layer over sandbox.toml, relative to that
// user's home. It is read at every launch of that user and never from a
// workspace; it may make the user's jails stricter, and add entries only to
// the keys root's file lists in user_may_add (docs/adr/0140-user-layer.md).
const UserConfigRel = ".config/cco/sandbox.toml"

// userConfigDir is the user layer's directory, home-relative: a protected
// home tree, so that no workspace or allow_write path can hold it and no
// session can write the layer the next launch reads.
const userConfigDir = ".config/cco"

// UserMayAddKeys are the keys user_may_add may list: the lists whose
// entries widen a jail. hide is not among them: a user may always hide
// more.
var UserMayAddKeys = []string{"pass_env", "home_read_only", "allow_write", "forge", "egress_allow", "allow_host", "allow_ip", "egress_ports", "host_ports", "ssh_hosts"}

// ConfigKeys are sandbox.toml's keys, in the order Config declares them.
var ConfigKeys = sync.OnceValue(func() []string {
	var out []string
	t := reflect.TypeOf(Config{})
	for i := range t.NumField() {
		if k := t.Field(i).Tag.Get("toml"); k != "" {
			out = append(out, k)
		}
	}
	return out
})

// unknownKeys refuses a file's keys that are not sandbox.toml's, naming the
// closest known key.
func unknownKeys(md toml.MetaData, path string) error {
	u := md.Undecoded()
	if len(u) == 0 {
		return nil
	}
	keys := make([]string, len(u))
	for i, k := range u {
		keys[i] = k.String()
	}
	sort.Strings(keys)
	k := keys[0]
	more := ""
	if len(keys) > 1 {
		more = fmt.Sprintf(" (and %d more unknown: %s)", len(keys)-1, strings.Join(keys[1:], ", "))
	}
	if s := suggest.Closest(k, ConfigKeys()); s != "" {
		return fmt.Errorf("%s: unknown key %q (did you mean %q?)%s (fix: rename %s to %s in %s)", path, k, s, more, k, s, path)
	}
	return fmt.Errorf("%s: unknown key %q%s (fix: remove it from %s; the keys are listed in the default file, `sudo cco-install` writes it when none exists)", path, k, more, path)
}

// definedKeys maps each key the file sets to the file.
func definedKeys(md toml.MetaData, path string) map[string]string {
	out := map[string]string{}
	for _, k := range ConfigKeys() {
		if md.IsDefined(k) {
			out[k] = path
		}
	}
	return out
}

// Source is the file a key's value came from: ConfigPath, the user's
// layer, both (for hide, whose entries add up), or "default".
func (c *Config) Source(key string) string {
	if s, ok := c.from[key]; ok {
		return s
	}
	return "default"
}

// entryFile is the file an entry of key came from, for a fix that names
// where to remove it: the user's layer for a hide entry it added, else
// the key's source (root's file when no file set it).
func (c *Config) entryFile(key, entry string) string {
	if key == "hide" && slices.Contains(c.userHide, entry) && !slices.Contains(c.Hide[:len(c.Hide)-len(c.userHide)], entry) {
		src := c.Source("hide")
		if i := strings.LastIndex(src, " and "); i >= 0 {
			return src[i+len(" and "):]
		}
		return src
	}
	if src := c.Source(key); src != "default" && !strings.Contains(src, " and ") {
		return src
	}
	return ConfigPath
}

// checkUserMayAdd refuses a user_may_add entry that names no key a user
// could add to.
func checkUserMayAdd(c *Config, path string) error {
	for _, k := range c.UserMayAdd {
		if slices.Contains(UserMayAddKeys, k) {
			continue
		}
		hint := ""
		if k == "hide" {
			hint = "; a user's file may always hide more"
		} else if s := suggest.Closest(k, UserMayAddKeys); s != "" {
			hint = fmt.Sprintf("; did you mean %q?", s)
		}
		return fmt.Errorf("%s: user_may_add entry %q is not a key a user may add to (%s)%s (fix: remove %q from user_may_add in %s)", path, k, strings.Join(UserMayAddKeys, ", "), hint, k, path)
	}
	return nil
}

// WithUserLayer is c (root's file) with the user's own layer at home
// applied, for agent (""; every agent, as `cco-install config` shows it).
// notes are one-line messages (a layer ignored, and why); an error refuses
// the launch: a bad layer, or one that widens what root did not let it.
// A missing layer is c itself.
func (c *Config) WithUserLayer(agentName, home string, uid int) (*Config, []string, error) {
	data, path, note, err := readUserLayer(home, uid)
	if err != nil {
		return nil, nil, err
	}
	if note != "" {
		return c, []string{note}, nil
	}
	if data == nil {
		return c, nil, nil
	}
	u, md, err := parseConfig(data, path)
	if err != nil {
		return nil, nil, err
	}
	if md.IsDefined("user_may_add") {
		return nil, nil, fmt.Errorf("%s: user_may_add is root's to set, in %s (fix: remove user_may_add from %s)", path, ConfigPath, path)
	}
	if err := checkUserEgress(u, agentName, home, path); err != nil {
		return nil, nil, err
	}
	m, err := mergeUser(c, u, md, path, agentName)
	return m, nil, err
}

// checkUserEgress checks the layer's network keys as the egress policy
// reads them, so that a bad value names the user's file, not root's.
func checkUserEgress(u *Config, agentName, home, path string) error {
	if agentName == "" {
		agentName = agent.Names()[0]
	}
	if _, err := EgressPolicy(u, agentName, home, nil); err != nil {
		_, why, _ := strings.Cut(err.Error(), ": ")
		if i := strings.LastIndex(why, " (fix that key in "); i >= 0 {
			why = why[:i]
		}
		return fmt.Errorf("%s: %s (fix: correct that key in %s)", path, why, path)
	}
	return nil
}

// readUserLayer reads home/UserConfigRel, walking from the home with no
// link followed. A missing file is (nil, "", "", nil). A layer that is a
// link, or that anyone but uid could have written (the file or a directory
// on its way), is not read: note says so, in one line.
func readUserLayer(home string, uid int) (data []byte, path, note string, err error) {
	path = filepath.Join(home, UserConfigRel)
	dir, err := unix.Open(home, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, "", "", nil // Plan refuses a bad home, with its own fix
	}
	defer func() {
		if dir >= 0 {
			unix.Close(dir)
		}
	}()
	parts := strings.Split(UserConfigRel, "/")
	at := home
	for i, name := range parts {
		last := i == len(parts)-1
		flags := unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			flags |= unix.O_RDONLY | unix.O_NONBLOCK
		} else {
			flags |= unix.O_PATH | unix.O_DIRECTORY
		}
		at = filepath.Join(at, name)
		fd, err := unix.Openat(dir, name, flags, 0)
		switch {
		case errors.Is(err, unix.ENOENT):
			return nil, "", "", nil
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			// O_NOFOLLOW's ELOOP, or O_DIRECTORY's ENOTDIR for a link or
			// for a file where a directory belongs (no layer): lstat
			// tells which.
			var lst unix.Stat_t
			if unix.Fstatat(dir, name, &lst, unix.AT_SYMLINK_NOFOLLOW) == nil && lst.Mode&unix.S_IFMT != unix.S_IFLNK {
				return nil, "", "", nil // no directory there, so no layer
			}
			return nil, "", userLayerIgnored(path, at+" is a link", "replace the link with the file or directory itself"), nil
		case err != nil:
			return nil, "", userLayerIgnored(path, fmt.Sprintf("opening %s: %v", at, err), "make it readable by you"), nil
		}
		unix.Close(dir)
		dir = fd
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, "", userLayerIgnored(path, fmt.Sprintf("reading %s: %v", at, err), "make it readable by you"), nil
		}
		if last && st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil, "", userLayerIgnored(path, at+" is not a regular file", "make it a file"), nil
		}
		if int(st.Uid) != uid || st.Mode&0o022 != 0 {
			fix := "chmod go-w " + shellQuote(at)
			if int(st.Uid) != uid {
				// Only root gives a file to another owner.
				fix = fmt.Sprintf("sudo chown %d %s && sudo chmod go-w %s", uid, shellQuote(at), shellQuote(at))
			}
			return nil, "", userLayerIgnored(path, fmt.Sprintf("%s is writable by others than you (owner uid %d, mode %04o)", at, st.Uid, st.Mode&0o7777), fix), nil
		}
	}
	f := os.NewFile(uintptr(dir), path)
	dir = -1
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxUserLayer+1))
	if err != nil {
		return nil, "", userLayerIgnored(path, fmt.Sprintf("reading it: %v", err), "make it readable by you"), nil
	}
	if len(b) > maxUserLayer {
		return nil, "", "", fmt.Errorf("%s is larger than %d bytes (fix: shorten it)", path, maxUserLayer)
	}
	return b, path, "", nil
}

// maxUserLayer bounds what a launch reads of a user's layer.
const maxUserLayer = 1 << 20

func userLayerIgnored(path, why, fix string) string {
	return fmt.Sprintf("ignoring your %s: %s (fix: %s)", path, why, fix)
}

// egressRank orders the egress modes from the strictest.
func egressRank(m string) int {
	switch m {
	case policy.ModeOff:
		return 0
	case policy.ModeAllowlist:
		return 1
	}
	return 2
}

// mergeUser applies the user's parsed layer u (the keys md defines) to
// root's c: a key the layer sets replaces root's value for that user,
// but for hide, whose entries add to root's. Entries beyond root's value
// are allowed only for a key root's user_may_add lists; a scalar only
// stricter.
func mergeUser(c, u *Config, md toml.MetaData, path, agentName string) (*Config, error) {
	m := *c
	m.from = map[string]string{}
	for k, v := range c.from {
		m.from[k] = v
	}
	set := func(key string) bool {
		if !md.IsDefined(key) {
			return false
		}
		m.from[key] = path
		return true
	}
	may := func(key string) bool { return slices.Contains(c.UserMayAdd, key) }
	widen := func(key, entry string) error {
		return fmt.Errorf("%s: %s entry %q is not in what %s allows, and its user_may_add does not list %s (fix: remove %q from %s in %s)",
			path, key, entry, ConfigPath, key, entry, key, path)
	}
	wider := func(key, val, root string) error {
		return fmt.Errorf("%s: %s = %s is wider than %s's %s, and a user's file may only make the jail stricter (fix: remove %s from %s)",
			path, key, val, ConfigPath, root, key, path)
	}
	// list checks each of a list's entries against root's, with covered
	// telling an entry root's value already allows.
	list := func(key string, entries []string, covered func(string) bool) error {
		if may(key) {
			return nil
		}
		for _, e := range entries {
			if !covered(e) {
				return widen(key, e)
			}
		}
		return nil
	}

	if set("pass_env") {
		if err := list("pass_env", u.PassEnv, func(e string) bool { return slices.Contains(c.PassEnv, e) }); err != nil {
			return nil, err
		}
		m.PassEnv = u.PassEnv
	}
	if set("forge") {
		if err := list("forge", u.Forge, func(e string) bool { return slices.Contains(c.Forge, e) }); err != nil {
			return nil, err
		}
		m.Forge = u.Forge
	}
	if set("allow_write") {
		if err := list("allow_write", u.AllowWrite, func(e string) bool {
			return slices.ContainsFunc(c.AllowWrite, func(r string) bool { return paths.Within(filepath.Clean(e), filepath.Clean(r)) })
		}); err != nil {
			return nil, err
		}
		m.AllowWrite = u.AllowWrite
	}
	if set("home_read_only") {
		rootTrees := c.HomeTrees()
		for i, t := range u.homeTrees {
			if may("home_read_only") || slices.ContainsFunc(rootTrees, func(r string) bool { return paths.Within(t, r) }) {
				continue
			}
			return nil, widen("home_read_only", u.HomeReadOnly[i])
		}
		m.HomeReadOnly, m.homeTrees = u.HomeReadOnly, u.homeTrees
	}
	if set("hide") {
		m.Hide = append(slices.Clone(c.Hide), u.Hide...)
		m.userHide = u.Hide
		if src := c.from["hide"]; src != "" {
			m.from["hide"] = src + " and " + path
		}
	}
	if set("caches") {
		if u.Caches != caches.Session && c.Caches == caches.Session {
			return nil, wider("caches", fmt.Sprintf("%q", caches.Persist), fmt.Sprintf("%q", caches.Session))
		}
		m.Caches = u.Caches
	}
	if set("claude_skip_permissions") {
		if u.ClaudeSkipPermissions && !c.ClaudeSkipPermissions {
			return nil, wider("claude_skip_permissions", "true", "false")
		}
		m.ClaudeSkipPermissions = u.ClaudeSkipPermissions
	}
	if set("workspace_root") {
		if c.WorkspaceRoot == "" || !paths.Within(filepath.Clean(u.WorkspaceRoot), filepath.Clean(c.WorkspaceRoot)) {
			root := fmt.Sprintf("%q", c.WorkspaceRoot)
			if c.WorkspaceRoot == "" {
				root = `"" (the current directory)`
			}
			return nil, wider("workspace_root", fmt.Sprintf("%q", u.WorkspaceRoot), root)
		}
		m.WorkspaceRoot = u.WorkspaceRoot
	}
	if set("max_procs") {
		if procs(u.MaxProcs) > procs(c.MaxProcs) {
			return nil, wider("max_procs", fmt.Sprint(u.MaxProcs), fmt.Sprint(procs(c.MaxProcs)))
		}
		m.MaxProcs = u.MaxProcs
	}
	if set("tmpfs_size") {
		ram := machineRAM()
		if u.TmpfsSize.total(ram) > c.TmpfsSize.total(ram) {
			return nil, wider("tmpfs_size", u.TmpfsSize.String(), c.TmpfsSize.String())
		}
		m.TmpfsSize = u.TmpfsSize
	}
	if set("egress_log") && u.EgressLog != c.EgressLog {
		return nil, fmt.Errorf("%s: egress_log is where root's policy keeps the audit log, and a user's file may not move it (fix: remove egress_log from %s)", path, path)
	}

	// The network: the mode only stricter; names, hosts, addresses and
	// ports only fewer, unless root lets the user add them.
	rootMode := c.Egress
	if rootMode == "" {
		rootMode = policy.ModePublic
	}
	if set("egress") {
		if egressRank(u.Egress) > egressRank(rootMode) {
			return nil, wider("egress", fmt.Sprintf("%q", u.Egress), fmt.Sprintf("%q", rootMode))
		}
		m.Egress = u.Egress
	}
	off := rootMode == policy.ModeOff
	if set("egress_allow") {
		// Under root's public mode any public name is allowed already.
		if rootMode == policy.ModeAllowlist {
			rootAllow := c.EgressAllow
			if c.EgressAllow == nil {
				rootAllow = defaultAllow(agentName)
			}
			if err := list("egress_allow", u.EgressAllow, func(e string) bool { return ruleCovered(rootAllow, e) }); err != nil {
				return nil, err
			}
		}
		m.EgressAllow = u.EgressAllow
	}
	if set("allow_host") {
		if !off {
			if err := list("allow_host", u.AllowHost, func(e string) bool { return ruleCovered(c.AllowHost, e) }); err != nil {
				return nil, err
			}
		}
		m.AllowHost = u.AllowHost
	}
	if set("allow_ip") {
		if !off {
			if err := list("allow_ip", u.AllowIP, func(e string) bool { return prefixCovered(c.AllowIP, e) }); err != nil {
				return nil, err
			}
		}
		m.AllowIP = u.AllowIP
	}
	if set("egress_ports") {
		rootPorts := c.EgressPorts
		if rootPorts == nil {
			rootPorts = policy.DefaultPorts
		}
		if !off && !may("egress_ports") {
			for _, p := range u.EgressPorts {
				if !slices.Contains(rootPorts, p) {
					return nil, widen("egress_ports", fmt.Sprint(p))
				}
			}
		}
		m.EgressPorts = u.EgressPorts
	}
	if set("host_ports") {
		if !may("host_ports") {
			for _, p := range u.HostPorts {
				if !slices.Contains(c.HostPorts, p) {
					return nil, widen("host_ports", fmt.Sprint(p))
				}
			}
		}
		m.HostPorts = u.HostPorts
	}
	if set("ssh_agent") {
		if u.SSHAgent && !c.SSHAgent {
			return nil, wider("ssh_agent", "true", "false")
		}
		m.SSHAgent = u.SSHAgent
	}
	if set("ssh_hosts") {
		rootHosts := c.SSHHostList()
		if err := list("ssh_hosts", u.SSHHosts, func(e string) bool { return ruleCovered(rootHosts, e) }); err != nil {
			return nil, err
		}
		m.SSHHosts = u.SSHHosts
	}
	if set("egress_upstream") && u.EgressUpstream != c.EgressUpstream {
		return nil, fmt.Errorf("%s: egress_upstream is root's to set, in %s (fix: remove egress_upstream from %s)", path, ConfigPath, path)
	}
	// A key this merge does not know is root's alone: a new key must say
	// here how a user may narrow it before a user's file may set it.
	for _, k := range ConfigKeys() {
		if md.IsDefined(k) && !slices.Contains(userKeys, k) {
			return nil, fmt.Errorf("%s: %s is root's to set, in %s (fix: remove %s from %s)", path, k, ConfigPath, k, path)
		}
	}
	return &m, nil
}

// userKeys are the keys a user's layer may set, each merged by mergeUser.
var userKeys = []string{"workspace_root", "allow_write", "pass_env", "forge", "claude_skip_permissions", "home_read_only",
	"caches", "hide", "tmpfs_size", "max_procs", "egress", "egress_allow", "allow_host", "allow_ip", "egress_ports",
	"egress_log", "egress_upstream", "host_ports", "ssh_agent", "ssh_hosts"}

// procs is max_procs's effective value.
func procs(n int) int {
	if n == 0 {
		return DefaultMaxProcs
	}
	return n
}

// defaultAllow is the shipped allowlist of agentName, or of every agent.
func defaultAllow(agentName string) []string {
	if agentName != "" {
		return policy.DefaultAllow(agentName)
	}
	var out []string
	for _, n := range agent.Names() {
		out = append(out, policy.DefaultAllow(n)...)
	}
	return out
}

// ruleCovered tells whether root's rules allow every name the rule e does:
// a name root matches, or a wildcard below one of root's.
func ruleCovered(rules []string, e string) bool {
	if slices.Contains(rules, e) {
		return true
	}
	if s, ok := strings.CutPrefix(e, "*."); ok {
		for _, r := range rules {
			if t, ok := strings.CutPrefix(r, "*."); ok && strings.HasSuffix(s, "."+t) {
				return true
			}
		}
		return false
	}
	return policy.MatchRule(rules, e)
}

// prefixCovered tells whether one of root's addresses or CIDRs holds e.
func prefixCovered(root []string, e string) bool {
	q, err := parsePrefix(e)
	if err != nil {
		return false
	}
	for _, r := range root {
		if p, err := parsePrefix(r); err == nil && p.Bits() <= q.Bits() && p.Contains(q.Addr()) {
			return true
		}
	}
	return false
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// String is a Size as sandbox.toml writes it.
func (z Size) String() string {
	switch {
	case z.Bytes > 0:
		return fmt.Sprint(z.Bytes)
	case z.Percent > 0:
		return fmt.Sprintf("%q", fmt.Sprintf("%g%%", z.Percent))
	}
	return `"50%"`
}

// applyUserLayer puts the launching user's layer over the configuration
// Start loaded, and prints its notes.
func applyUserLayer(l *Launch) error {
	c, notes, err := l.Config.WithUserLayer(l.Profile.Name, l.Home, l.UID)
	if err != nil {
		return err
	}
	if src := c.Source("egress"); src != l.Config.Source("egress") && c.Egress != l.Config.Egress {
		// The banner names root's file; the mode is the user's.
		notes = append(notes, fmt.Sprintf("egress = %q comes from your %s (root's is %q)", c.Egress, src, cmp.Or(l.Config.Egress, policy.ModePublic)))
	}
	for _, n := range notes {
		fmt.Fprintf(l.Messages, "cco: %s\n", safetext.Escape(n))
	}
	l.Config = c
	return nil
}

// leaveOutTree is the fix that leaves the home tree rel out of one user's
// jails: the user's own layer with home_read_only set to the trees in
// force less that one (fewer trees are always the user's to choose).
func leaveOutTree(home string, rels []string, rel string) string {
	var l []string
	for _, r := range rels {
		if r != rel {
			l = append(l, strconv.Quote("~/"+r))
		}
	}
	return fmt.Sprintf("add home_read_only = [%s] to %s", strings.Join(l, ", "), filepath.Join(home, UserConfigRel))
}
