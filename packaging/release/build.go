package release

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Options say what to build and where.
type Options struct {
	// Repo is the checkout: main packages and relative content paths resolve
	// against it.
	Repo string
	// Dist is where binaries and packages go (default: the file's dist,
	// under Repo). A content src starting with "dist/" resolves here.
	Dist string
	// Version is the release version without a leading v ("0.1.0").
	Version string
	// Arches to build (default: every goarch of the builds).
	Arches []string
	// Formats to package (default: every format of the nfpms).
	Formats []string
	// Epoch is the time stamped on every file (SOURCE_DATE_EPOCH).
	Epoch time.Time
	// Prebuilt maps a build id to a file to use instead of compiling it
	// (a stand-in while a binary does not build).
	Prebuilt map[string]string
	// Log receives one line per action; nil discards.
	Log io.Writer
	// SigningKey, when set, is the OpenPGP secret key file that signs every
	// package, whatever the nfpm sections' key_file says.
	SigningKey string
}

// Artifact is one file the run produced.
type Artifact struct {
	Kind   string // "binary", "deb", "rpm", "checksum"
	Build  string // build id, for binaries
	Arch   string
	Path   string
	SHA256 string
}

// Epoch reads SOURCE_DATE_EPOCH, else the checkout's last commit time: a
// package must not carry the time it was built.
func Epoch(repo string) (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want whole seconds since 1970", s)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	out, err := exec.Command("git", "-C", repo, "log", "-1", "--format=%ct").Output()
	if err != nil {
		return time.Time{}, fmt.Errorf("no SOURCE_DATE_EPOCH and no git commit time in %s: %v; set SOURCE_DATE_EPOCH", repo, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("git commit time %q in %s: %v; set SOURCE_DATE_EPOCH", out, repo, err)
	}
	return time.Unix(n, 0).UTC(), nil
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

func (o *Options) fill(f *File) error {
	if o.Version == "" {
		return fmt.Errorf("no version given (for example --version 0.1.0)")
	}
	if strings.HasPrefix(o.Version, "v") {
		return fmt.Errorf("version %q: give it without the leading v, as goreleaser's .Version", o.Version)
	}
	if o.Epoch.IsZero() {
		return fmt.Errorf("no epoch given: packages need a fixed time (SOURCE_DATE_EPOCH)")
	}
	if o.Repo == "" {
		o.Repo = "."
	}
	if o.Dist == "" {
		o.Dist = filepath.Join(o.Repo, f.Dist)
	}
	if len(o.Arches) == 0 {
		seen := map[string]bool{}
		for _, b := range f.Builds {
			for _, a := range b.Goarch {
				if !seen[a] {
					seen[a] = true
					o.Arches = append(o.Arches, a)
				}
			}
		}
		sort.Strings(o.Arches)
	}
	for _, a := range o.Arches {
		if _, ok := distSuffix[a]; !ok {
			return fmt.Errorf("arch %q: want amd64 or arm64", a)
		}
	}
	for id := range o.Prebuilt {
		if _, ok := f.BuildByID(id); !ok {
			return fmt.Errorf("prebuilt binary for %q: no build has that id", id)
		}
	}
	return nil
}

// templateData is what goreleaser templates may use here.
func (o *Options) templateData(f *File, arch string) map[string]any {
	return map[string]any{
		"ProjectName":     f.ProjectName,
		"Version":         o.Version,
		"Os":              "linux",
		"Arch":            arch,
		"CommitDate":      o.Epoch.UTC().Format(time.RFC3339),
		"CommitTimestamp": strconv.FormatInt(o.Epoch.Unix(), 10),
	}
}

// binaryPath is goreleaser's layout: dist/<id>_linux_<arch><suffix>/<binary>.
func (o *Options) binaryPath(b *Build, arch string) string {
	return filepath.Join(o.Dist, b.ID+"_linux_"+arch+distSuffix[arch], b.Binary)
}

// BuildBinaries compiles every build for every requested arch it lists.
func BuildBinaries(ctx context.Context, f *File, o *Options) ([]Artifact, error) {
	if err := o.fill(f); err != nil {
		return nil, err
	}
	var out []Artifact
	for i := range f.Builds {
		b := &f.Builds[i]
		for _, arch := range o.Arches {
			if !contains(b.Goarch, arch) {
				continue
			}
			a, err := o.buildOne(ctx, f, b, arch)
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
	}
	return out, nil
}

func (o *Options) buildOne(ctx context.Context, f *File, b *Build, arch string) (Artifact, error) {
	data := o.templateData(f, arch)
	dst := o.binaryPath(b, arch)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return Artifact{}, fmt.Errorf("creating %s: %w", filepath.Dir(dst), err)
	}
	if src, ok := o.Prebuilt[b.ID]; ok {
		o.logf("binary %s %s: using prebuilt %s", b.ID, arch, src)
		if err := copyFile(src, dst, 0o755); err != nil {
			return Artifact{}, err
		}
	} else {
		var ld []string
		for _, l := range b.Ldflags {
			s, err := expand("builds."+b.ID+".ldflags", l, data)
			if err != nil {
				return Artifact{}, err
			}
			ld = append(ld, s)
		}
		args := append([]string{"build"}, b.Flags...)
		args = append(args, "-ldflags", strings.Join(ld, " "), "-o", dst, b.Main)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = o.Repo
		cmd.Env = append(append(append(os.Environ(), f.Env...), b.Env...), "GOOS=linux", "GOARCH="+arch)
		o.logf("binary %s %s: go %s", b.ID, arch, strings.Join(args, " "))
		if msg, err := cmd.CombinedOutput(); err != nil {
			return Artifact{}, fmt.Errorf("building %s for %s (go %s): %v\n%s", b.ID, arch, strings.Join(args, " "), err, msg)
		}
	}
	if b.ModTimestamp != "" {
		s, err := expand("builds."+b.ID+".mod_timestamp", b.ModTimestamp, data)
		if err != nil {
			return Artifact{}, err
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Artifact{}, fmt.Errorf("builds.%s.mod_timestamp %q: not unix seconds", b.ID, s)
		}
		if err := os.Chtimes(dst, time.Unix(n, 0), time.Unix(n, 0)); err != nil {
			return Artifact{}, fmt.Errorf("stamping %s: %w", dst, err)
		}
	}
	sum, err := fileSHA256(dst)
	if err != nil {
		return Artifact{}, err
	}
	return Artifact{Kind: "binary", Build: b.ID, Arch: arch, Path: dst, SHA256: sum}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortStrings(s []string) { sort.Strings(s) }
