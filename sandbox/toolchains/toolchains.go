// Package toolchains decides which of the user's own toolchains, installed
// under the home, the jail shows, and the PATH it runs them from.
//
// The jail's home is private: a tmpfs with the agent's login state bound in.
// The trees that home_read_only lists (rustup's, nvm's, uv's Pythons ...)
// are bound into it read-only where they exist, so that the agent builds
// and tests with the user's toolchains but can never change them: a
// toolchain is a program the user runs on the host. Credential files in
// such a tree, found by name at any depth (Scan), are masked.
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

// Credential is a file name that tools give a file holding a secret
// (a registry token, an index URL with its password, a master key). The
// name is the tool's; where the file lies is up to the installer, the
// user or the tool's version (npm's builtin config, a Maven
// distribution's conf/, a venv's site config), so Scan finds it by name
// at any depth of a bound tree. docs/reference/toolchains.md gives the
// source of each.
type Credential struct {
	// Name is the file's name, matched without regard to case.
	Name string
	// Stand is what the jail shows in its place: the empty form of the
	// file's format, so that the tool still starts and reads no secret
	// ("" is an empty file).
	Stand string
}

// Credentials are the credential file names masked wherever a bound tree
// holds them.
var Credentials = []Credential{
	{Name: "npmrc"},    // npm's builtin config (<npm>/npmrc) and global config ($PREFIX/etc/npmrc)
	{Name: ".npmrc"},   // npm's per-user and per-project config
	{Name: "pip.conf"}, // pip's site config (sys.prefix/pip.conf: every venv, pipx's and uv's tools)
	{Name: ".pypirc"},  // twine's and setuptools' upload credentials
	{Name: "settings.xml", Stand: "<settings/>\n"},                                                   // Maven's global (conf/) and user settings: <server> passwords
	{Name: "settings-security.xml", Stand: "<settingsSecurity/>\n"},                                  // Maven's master password
	{Name: "NuGet.Config", Stand: "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<configuration />\n"}, // NuGet's packageSourceCredentials
	{Name: "gradle.properties"},                                                                      // Gradle's properties in GRADLE_USER_HOME and a distribution: repository credentials
	{Name: "credentials"},                                                                            // cargo's older name, RubyGems' API key, the AWS CLI's keys
	{Name: "credentials.toml"},                                                                       // cargo login's registry tokens, uv auth login's credentials
	{Name: ".credentials"},                                                                           // sbt's and Ivy's repository credentials
	{Name: ".netrc"},                                                                                 // curl's, git's, pip's and Go's logins
	{Name: ".git-credentials"},                                                                       // git credential-store's plain-text logins
	{Name: ".yarnrc.yml"},                                                                            // Yarn's npmAuthToken and npmAuthIdent
	{Name: "bunfig.toml"},                                                                            // bun's registry tokens ([install.scopes])
	{Name: ".bunfig.toml"},                                                                           // bun's global config, the same
	{Name: ".pgpass"},                                                                                // PostgreSQL's password file
	{Name: "credentials.tfrc.json", Stand: "{}\n"},                                                   // terraform login's API tokens
	{Name: ".vault-token"},                                                                           // Vault's token helper
}

// CredentialDirs are directories (home-relative, ending in "/") that hold
// nothing but credentials: shown empty wherever a bound tree holds them.
// A "*" matches one path element.
var CredentialDirs = []string{
	".local/share/uv/credentials/", // uv auth login
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

// Masks are the credential directories (home-relative) that can lie in
// the bound entries: CredentialDirs matched against each entry, each
// result still a pattern for glob. Only those in a bound tree are
// returned.
func Masks(entries []Entry) []string {
	var out []string
	for _, c := range CredentialDirs {
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

// StandIn is what the jail shows in place of the credential file name.
func StandIn(name string) string {
	for _, c := range Credentials {
		if c.Name == name {
			return c.Stand
		}
	}
	return ""
}
