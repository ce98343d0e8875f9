// Package release reads the release settings of goreleaser.yaml (its builds
// and nfpms sections) and builds the binaries and the deb and rpm packages
// from them offline, with the nfpm Go module. CI and the vm-tests package
// exactly what a goreleaser release ships, without goreleaser.
//
// Only the goreleaser fields this package understands are accepted in the
// sections it reads: an unknown field is an error, so the two builds cannot
// drift apart silently.
package release

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"text/template"

	"go.yaml.in/yaml/v3"
)

// File is goreleaser.yaml. The sections mkpkg does not read (archives,
// checksum's siblings, release, changelog) are kept as raw nodes.
type File struct {
	Version     int       `yaml:"version"`
	ProjectName string    `yaml:"project_name"`
	Dist        string    `yaml:"dist"`
	Env         []string  `yaml:"env"`
	Builds      []Build   `yaml:"builds"`
	NFPMs       []NFPM    `yaml:"nfpms"`
	Checksum    Checksum  `yaml:"checksum"`
	Before      Before    `yaml:"before"`
	Archives    yaml.Node `yaml:"archives"`
	Release     yaml.Node `yaml:"release"`
	Changelog   yaml.Node `yaml:"changelog"`
}

// Before is the before section: commands run before the builds. mkpkg
// runs those that are "go run" (they make package contents under build/,
// such as the man pages); the others (ansible-galaxy) are the release's.
type Before struct {
	Hooks []string `yaml:"hooks"`
}

// Build is one entry of builds.
type Build struct {
	ID           string   `yaml:"id"`
	Main         string   `yaml:"main"`
	Binary       string   `yaml:"binary"`
	Goos         []string `yaml:"goos"`
	Goarch       []string `yaml:"goarch"`
	Flags        []string `yaml:"flags"`
	Ldflags      []string `yaml:"ldflags"`
	Env          []string `yaml:"env"`
	ModTimestamp string   `yaml:"mod_timestamp"`
}

// NFPM is one entry of nfpms.
type NFPM struct {
	ID               string    `yaml:"id"`
	PackageName      string    `yaml:"package_name"`
	IDs              []string  `yaml:"ids"`
	Formats          []string  `yaml:"formats"`
	Vendor           string    `yaml:"vendor"`
	Homepage         string    `yaml:"homepage"`
	Maintainer       string    `yaml:"maintainer"`
	Description      string    `yaml:"description"`
	License          string    `yaml:"license"`
	Section          string    `yaml:"section"`
	Priority         string    `yaml:"priority"`
	Bindir           string    `yaml:"bindir"`
	MTime            string    `yaml:"mtime"`
	FileNameTemplate string    `yaml:"file_name_template"`
	Dependencies     []string  `yaml:"dependencies"`
	Contents         []Content `yaml:"contents"`
	Scripts          Scripts   `yaml:"scripts"`
	RPM              RPM       `yaml:"rpm"`
	Deb              Deb       `yaml:"deb"`
}

// Deb is an nfpm's deb section.
type Deb struct {
	Signature Signature `yaml:"signature"`
}

// Signature is a package signature's settings: key_file is an OpenPGP
// secret key (armored or not). An empty key_file leaves the package
// unsigned; the passphrase comes from the environment, as in goreleaser
// (NFPM_<ID>_<FORMAT>_PASSPHRASE, NFPM_<ID>_PASSPHRASE, NFPM_PASSPHRASE).
type Signature struct {
	KeyFile string `yaml:"key_file"`
	// Type is the deb signature's role: origin (the default), maint or archive.
	Type string `yaml:"type"`
}

// RPM is an nfpm's rpm section. buildhost matters: without it the package
// carries the name of the machine that built it.
type RPM struct {
	Summary   string    `yaml:"summary"`
	Group     string    `yaml:"group"`
	Packager  string    `yaml:"packager"`
	BuildHost string    `yaml:"buildhost"`
	Signature Signature `yaml:"signature"`
}

// Content is one entry of an nfpm's contents.
type Content struct {
	Src  string `yaml:"src"`
	Dst  string `yaml:"dst"`
	Type string `yaml:"type"`
	// Packager limits the entry to one format (deb or rpm): a file whose
	// standard place differs between the distributions.
	Packager string   `yaml:"packager"`
	FileInfo FileInfo `yaml:"file_info"`
}

// FileInfo is a content's owner and mode.
type FileInfo struct {
	Mode  os.FileMode `yaml:"mode"`
	Owner string      `yaml:"owner"`
	Group string      `yaml:"group"`
	MTime string      `yaml:"mtime"`
}

// Scripts are the maintainer scripts.
type Scripts struct {
	PreInstall  string `yaml:"preinstall"`
	PostInstall string `yaml:"postinstall"`
	PreRemove   string `yaml:"preremove"`
	PostRemove  string `yaml:"postremove"`
}

// Checksum is the checksum section.
type Checksum struct {
	NameTemplate string `yaml:"name_template"`
	Algorithm    string `yaml:"algorithm"`
}

// Load reads and checks goreleaser.yaml.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading release settings: %w", err)
	}
	return Parse(path, b)
}

// Parse reads goreleaser.yaml's bytes; path names the file in errors.
func Parse(path string, b []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %v (mkpkg reads only the goreleaser fields listed in packaging/release/config.go; add a new one there first)", path, err)
	}
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Dist == "" {
		f.Dist = "dist"
	}
	return &f, nil
}

func (f *File) check() error {
	if f.Version != 2 {
		return fmt.Errorf("version: %d, want 2 (goreleaser v2 format)", f.Version)
	}
	if f.ProjectName == "" {
		return fmt.Errorf("project_name is empty")
	}
	ids := map[string]bool{}
	for i, b := range f.Builds {
		if b.ID == "" || b.Main == "" || b.Binary == "" {
			return fmt.Errorf("builds[%d]: id, main and binary are required", i)
		}
		if ids[b.ID] {
			return fmt.Errorf("builds[%d]: id %q used twice", i, b.ID)
		}
		ids[b.ID] = true
		if len(b.Goos) != 1 || b.Goos[0] != "linux" {
			return fmt.Errorf("builds[%d] (%s): goos %v, want [linux]", i, b.ID, b.Goos)
		}
		for _, a := range b.Goarch {
			if _, ok := distSuffix[a]; !ok {
				return fmt.Errorf("builds[%d] (%s): goarch %q is not one of amd64, arm64", i, b.ID, a)
			}
		}
	}
	for i, n := range f.NFPMs {
		if n.PackageName == "" || n.Bindir == "" || len(n.Formats) == 0 {
			return fmt.Errorf("nfpms[%d]: package_name, bindir and formats are required", i)
		}
		for _, id := range n.IDs {
			if !ids[id] {
				return fmt.Errorf("nfpms[%d]: ids names %q, which is not a build id", i, id)
			}
		}
		for _, fm := range n.Formats {
			if fm != "deb" && fm != "rpm" {
				return fmt.Errorf("nfpms[%d]: format %q, want deb or rpm", i, fm)
			}
		}
	}
	return nil
}

// distSuffix is goreleaser's default dist directory suffix per architecture
// (GOAMD64=v1, GOARM64=v8.0), so contents globs written for goreleaser match
// the binaries mkpkg lays out.
var distSuffix = map[string]string{"amd64": "_v1", "arm64": "_v8.0"}

// BuildByID returns the build with that id.
func (f *File) BuildByID(id string) (*Build, bool) {
	for i := range f.Builds {
		if f.Builds[i].ID == id {
			return &f.Builds[i], true
		}
	}
	return nil, false
}

// expand evaluates a goreleaser template against the fields mkpkg knows; any
// other field is an error rather than an empty string.
func expand(what, text string, data map[string]any) (string, error) {
	if !strings.Contains(text, "{{") {
		return text, nil
	}
	t, err := template.New(what).Option("missingkey=error").Funcs(funcs).Parse(text)
	if err != nil {
		return "", fmt.Errorf("%s: template %q: %w", what, text, err)
	}
	var out strings.Builder
	if err := t.Execute(&out, data); err != nil {
		return "", fmt.Errorf("%s: template %q: %w (mkpkg knows %s)", what, text, err, knownFields(data))
	}
	return out.String(), nil
}

// funcs are the goreleaser template functions mkpkg knows.
var funcs = template.FuncMap{
	// envOrDefault is goreleaser's: the variable, or def when it is unset
	// or empty (a release sets the signing key; a test build need not).
	"envOrDefault": func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	},
}

func knownFields(data map[string]any) string {
	var names []string
	for k := range data {
		names = append(names, "."+k)
	}
	sortStrings(names)
	return strings.Join(names, ", ")
}
