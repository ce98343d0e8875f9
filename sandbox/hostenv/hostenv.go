// Package hostenv decides which of the host's variables beyond the
// jail's fixed allow-list enter one agent's jail, and which host files
// they name must be readable there: the company's CA (every jail) and the
// agent's own settings variables (its jail alone). It reads the
// environment and the filesystem and changes nothing; sandbox.Plan turns
// its answer into the jail's environment and read-only binds.
package hostenv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cco-dev/cco/agent"
)

// CAVars name the company's CA for the programs that read one: Node,
// OpenSSL (a file, and a directory list), Python's requests, curl, git and
// pip. They pass into every agent's jail, and what each names is readable
// there.
var CAVars = []string{"NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
	"CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT"}

// listVars take a list of paths, separated by colons (OpenSSL's
// SSL_CERT_DIR).
var listVars = map[string]bool{"SSL_CERT_DIR": true}

// View is what the jail shows of the host: Visible reports whether a host
// path is seen in the jail as it is on the host; Protected names the
// protected tree (~/.ssh, ~/.aws, another agent's login, a hidden tree)
// that holds p, or ""; Holds names such a tree that lies within the
// directory dir, or "".
type View interface {
	Visible(p string) bool
	Protected(p string) string
	Holds(dir string) string
}

// File is a host file or directory bound read-only into the jail: Src is
// its real path (no link in it), Dst where the jail shows it.
type File struct {
	Src, Dst string
}

// Refusal is a variable that names a path in a protected tree, or a
// directory that holds one (Holds).
type Refusal struct {
	Var, Path, Tree string
	Holds           bool
}

func (r *Refusal) Error() string {
	if r.Holds {
		return fmt.Sprintf("%s names the directory %s, which holds the protected tree %s: binding it would show that tree in the jail (fix: put the files in a directory of their own, e.g. /usr/local/share/ca-certificates or ~/certs, and point %s there, or unset %s)",
			r.Var, r.Path, r.Tree, r.Var, r.Var)
	}
	return fmt.Sprintf("%s names %s, which lies in the protected tree %s: the jail never shows it (fix: put the file outside %s, e.g. in /usr/local/share/ca-certificates or a directory of your own, and point %s there, or unset %s)",
		r.Var, r.Path, r.Tree, r.Tree, r.Var, r.Var)
}

// CA returns the CA variables set on the host (KEY=VALUE, unchanged), and
// the files they name that the jail would not show, each to be bound
// read-only at its own path. A variable naming a path in a protected tree
// is a *Refusal; one naming nothing that exists passes as it is (the
// program then reports it, as on the host).
func CA(environ []string, v View) (env []string, files []File, err error) {
	for _, kv := range environ {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || !slices.Contains(CAVars, k) || val == "" {
			continue
		}
		paths := []string{val}
		if listVars[k] {
			paths = strings.Split(val, ":")
		}
		for _, p := range paths {
			if p == "" || !filepath.IsAbs(p) {
				continue
			}
			f, err := Readable(k, p, v)
			if err != nil {
				return nil, nil, err
			}
			if f != nil && !slices.Contains(files, *f) {
				files = append(files, *f)
			}
		}
		env = append(env, kv)
	}
	return env, files, nil
}

// Readable decides how the host path p, named by the variable name, is
// readable in the jail: nil when the jail shows it already or it does not
// exist, a File to bind otherwise. A path in a protected tree, as given or
// once its links are resolved, is a *Refusal.
func Readable(name, p string, v View) (*File, error) {
	p = filepath.Clean(p)
	if t := v.Protected(p); t != "" {
		return nil, &Refusal{Var: name, Path: p, Tree: t}
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s names %s: %w (fix: point %s at a readable file, or unset it)", name, p, err, name)
	}
	if t := v.Protected(real); t != "" {
		return nil, &Refusal{Var: name, Path: p + " (" + real + ")", Tree: t}
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("%s names %s: %w (fix: point %s at a readable file, or unset it)", name, p, err, name)
	}
	if st.IsDir() && (!v.Visible(p) || !v.Visible(real)) {
		// A directory bound read-only shows all of it: the trees the
		// jail hides in it too.
		for _, d := range []string{p, real} {
			if t := v.Holds(d); t != "" {
				return nil, &Refusal{Var: name, Path: p, Tree: t, Holds: true}
			}
		}
	}
	switch {
	case !v.Visible(p):
		// The path as given, where programs open it.
		return &File{Src: real, Dst: p}, nil
	case !v.Visible(real):
		// A visible link to a file the jail hides: the link resolves
		// to the bound file.
		return &File{Src: real, Dst: real}, nil
	}
	return nil, nil
}

// Settings are p's own settings variables set on the host (KEY=VALUE):
// what its profile's SettingsEnv names and Setting allows.
func Settings(p *agent.Profile, environ []string) []string {
	var out []string
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); ok && p.Setting(k) {
			out = append(out, kv)
		}
	}
	return out
}
