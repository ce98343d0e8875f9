// Package toolchains decides which of the user's own toolchains, installed
// under the home, the jail shows, and the PATH it runs them from.
//
// The jail's home is private: a tmpfs with the agent's login state bound in.
// The trees that home_read_only lists (rustup's, nvm's, uv's Pythons ...)
// are bound into it read-only where they exist, so that the agent builds
// and tests with the user's toolchains but can never change them: a
// toolchain is a program the user runs on the host. Credential files known
// to live in such a tree are masked.
package toolchains

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cco-dev/cco/internal/paths"
)

// Default is home_read_only's shipped value: the well-known toolchain trees,
// home-relative ("~/" form). docs/reference/toolchains.md gives the source of
// each entry.
var Default = []string{
	"~/.rustup", "~/.cargo/bin", // rustup: RUSTUP_HOME and CARGO_HOME/bin
	"~/.local/bin",                         // uv, pipx, mise and pip --user put commands here
	"~/.local/share/uv/python",             // uv python install
	"~/.local/share/uv/tools",              // uv tool install (~/.local/bin links into it)
	"~/.local/share/pipx", "~/.local/pipx", // pipx's venvs, new and old default
	"~/.nvm",                       // nvm (NVM_DIR)
	"~/.local/share/fnm", "~/.fnm", // fnm (FNM_DIR), new and old default
	"~/.local/state/fnm_multishells", // fnm env's per-shell links on PATH
	"~/.volta",                       // volta (VOLTA_HOME)
	"~/.pyenv",                       // pyenv (PYENV_ROOT)
	"~/.local/share/mise",            // mise's installs and shims
	"~/.asdf", "~/.tool-versions",    // asdf (ASDF_DATA_DIR) and its global versions
	"~/.sdkman",         // SDKMAN (SDKMAN_DIR)
	"~/go/bin", "~/sdk", // go install, golang.org/dl toolchains
	"~/.bun",                         // bun (BUN_INSTALL)
	"~/.deno",                        // deno (DENO_INSTALL)
	"~/.juliaup", "~/.julia/juliaup", // juliaup and the Julias it installs
	"~/.ghcup",  // ghcup (GHCUP_INSTALL_BASE_PREFIX/.ghcup)
	"~/.elan",   // elan (ELAN_HOME)
	"~/.opam",   // opam (OPAMROOT)
	"~/.dotnet", // dotnet-install.sh and dotnet tools
}

// Credentials are files (or directories, ending in "/") that the tools
// keep inside their trees and that hold a secret: masked wherever a bound
// tree holds them. A "*" matches one path element.
var Credentials = []string{
	".cargo/credentials.toml", ".cargo/credentials", // cargo login
	".local/share/uv/credentials/", // uv auth login
	// npm's global config ($PREFIX/etc/npmrc) can hold registry tokens.
	".nvm/versions/node/*/etc/npmrc",
	".local/share/fnm/node-versions/*/installation/etc/npmrc",
	".fnm/node-versions/*/installation/etc/npmrc",
	".volta/tools/image/node/*/etc/npmrc",
	".local/share/mise/installs/node/*/etc/npmrc",
	".asdf/installs/nodejs/*/etc/npmrc",
	// pip's site config (sys.prefix/pip.conf) can hold an index URL with
	// its password.
	".pyenv/versions/*/pip.conf",
	".local/share/uv/python/*/pip.conf",
	".local/share/mise/installs/python/*/pip.conf",
	".asdf/installs/python/*/pip.conf",
}

// Entry is one home_read_only entry, home-relative ("x/y" for "~/x/y").
type Entry = string

// Parse checks home_read_only's entries: each starts with "~/" and names a
// path below the home, not the home itself, and is, contains or lies in
// none of protected (home-relative trees holding credentials or cco's own
// state). It returns them home-relative.
func Parse(entries, protected []string) ([]Entry, error) {
	out := make([]Entry, 0, len(entries))
	for _, e := range entries {
		rel, ok := strings.CutPrefix(e, "~/")
		if !ok {
			return nil, fmt.Errorf("home_read_only entry %q does not start with ~/ (fix: write it as ~/path/in/your/home)", e)
		}
		clean := filepath.Clean(rel)
		if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || filepath.IsAbs(clean) {
			return nil, fmt.Errorf("home_read_only entry %q is not a path below the home (fix: name a tree in it, such as ~/.rustup)", e)
		}
		for _, p := range protected {
			if paths.Within(clean, p) || paths.Within(p, clean) {
				return nil, fmt.Errorf("home_read_only entry %q is, contains or lies in ~/%s, which holds credentials or cco's own state (fix: remove it from home_read_only, or name a tree beside ~/%s)", e, p, p)
			}
		}
		out = append(out, clean)
	}
	return out, nil
}

// Masks are the credential paths (home-relative) that can lie in the
// bound entries: Credentials matched against each entry, each result still
// a pattern for glob. Only those in a bound tree are returned.
func Masks(entries []Entry) []string {
	var out []string
	for _, c := range Credentials {
		cp := strings.TrimSuffix(c, "/")
		for _, e := range entries {
			if withinPattern(cp, e) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// withinPattern reports whether the pattern p, element by element, lies in
// the plain path dir.
func withinPattern(p, dir string) bool {
	pe, de := strings.Split(p, "/"), strings.Split(dir, "/")
	if len(pe) < len(de) {
		return false
	}
	for i, d := range de {
		if ok, _ := filepath.Match(pe[i], d); !ok {
			return false
		}
	}
	return true
}
