package release

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// Packages builds every nfpm package for every requested arch and format
// from binaries already laid out by BuildBinaries and the contents the
// before hooks make (Generate), then writes the checksum file over them.
func Packages(ctx context.Context, f *File, o *Options) ([]Artifact, error) {
	if err := Generate(ctx, f, o); err != nil {
		return nil, err
	}
	var out []Artifact
	for i := range f.NFPMs {
		n := &f.NFPMs[i]
		for _, arch := range o.Arches {
			for _, format := range n.Formats {
				if len(o.Formats) > 0 && !contains(o.Formats, format) {
					continue
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				a, err := o.packageOne(f, n, arch, format)
				if err != nil {
					return nil, err
				}
				out = append(out, a)
			}
		}
	}
	if f.Checksum.NameTemplate != "" && len(out) > 0 {
		if a := f.Checksum.Algorithm; a != "" && a != "sha256" {
			return nil, fmt.Errorf("checksum.algorithm %q: mkpkg writes sha256 only", a)
		}
		name, err := expand("checksum.name_template", f.Checksum.NameTemplate, o.templateData(f, ""))
		if err != nil {
			return nil, err
		}
		p := filepath.Join(o.Dist, name)
		if err := writeChecksums(p, out); err != nil {
			return nil, err
		}
		out = append(out, Artifact{Kind: "checksum", Path: p})
	}
	return out, nil
}

// Info is the nfpm package description for one arch and format, the way
// goreleaser's nfpm pipe builds it from the same section.
func (o *Options) Info(f *File, n *NFPM, arch, format string) (*nfpm.Info, error) {
	if err := o.fill(f); err != nil {
		return nil, err
	}
	data := o.templateData(f, arch)
	what := "nfpms." + n.ID
	info := &nfpm.Info{
		Name:        n.PackageName,
		Arch:        arch,
		Platform:    "linux",
		Version:     o.Version,
		Section:     n.Section,
		Priority:    n.Priority,
		Maintainer:  n.Maintainer,
		Description: n.Description,
		Vendor:      n.Vendor,
		Homepage:    n.Homepage,
		License:     n.License,
		MTime:       o.Epoch,
	}
	if n.MTime != "" {
		s, err := expand(what+".mtime", n.MTime, data)
		if err != nil {
			return nil, err
		}
		if err := info.MTime.UnmarshalText([]byte(s)); err != nil {
			return nil, fmt.Errorf("%s.mtime %q: not an RFC 3339 time", what, s)
		}
	}
	info.Depends = n.Dependencies
	if arch == "amd64" {
		// goreleaser builds GOAMD64=v1 and says so in the deb's control.
		info.Deb.ArchVariant = "v1"
	}
	if err := o.signature(info, n, format, data); err != nil {
		return nil, err
	}
	info.RPM.Summary, info.RPM.Group = n.RPM.Summary, n.RPM.Group
	info.RPM.Packager, info.RPM.BuildHost = n.RPM.Packager, n.RPM.BuildHost
	for _, id := range n.IDs {
		b, _ := f.BuildByID(id)
		if !contains(b.Goarch, arch) {
			return nil, fmt.Errorf("%s: build %s has no %s binary", what, id, arch)
		}
		info.Contents = append(info.Contents, &files.Content{
			Source:      o.binaryPath(b, arch),
			Destination: filepath.Join(n.Bindir, b.Binary),
			FileInfo:    &files.ContentFileInfo{Mode: 0o755},
		})
	}
	for j, c := range n.Contents {
		src, err := expand(fmt.Sprintf("%s.contents[%d].src", what, j), c.Src, data)
		if err != nil {
			return nil, err
		}
		dst, err := expand(fmt.Sprintf("%s.contents[%d].dst", what, j), c.Dst, data)
		if err != nil {
			return nil, err
		}
		fi := &files.ContentFileInfo{Mode: c.FileInfo.Mode, Owner: c.FileInfo.Owner, Group: c.FileInfo.Group}
		if c.FileInfo.MTime != "" {
			s, err := expand(fmt.Sprintf("%s.contents[%d].file_info.mtime", what, j), c.FileInfo.MTime, data)
			if err != nil {
				return nil, err
			}
			if err := fi.MTime.UnmarshalText([]byte(s)); err != nil {
				return nil, fmt.Errorf("%s.contents[%d].file_info.mtime %q: not an RFC 3339 time", what, j, s)
			}
		}
		info.Contents = append(info.Contents, &files.Content{
			Source:      o.resolve(f, src),
			Destination: dst,
			Type:        c.Type,
			Packager:    c.Packager,
			FileInfo:    fi,
		})
	}
	sc := n.Scripts
	info.Scripts = nfpm.Scripts{
		PreInstall:  o.resolveOpt(f, sc.PreInstall),
		PostInstall: o.resolveOpt(f, sc.PostInstall),
		PreRemove:   o.resolveOpt(f, sc.PreRemove),
		PostRemove:  o.resolveOpt(f, sc.PostRemove),
	}
	nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return nil, fmt.Errorf("%s (%s %s): %w", what, format, arch, err)
	}
	return info, nil
}

// resolve maps a goreleaser path (relative to the checkout, or under the
// dist directory) to this run's. What the before hooks make under build/
// is this run's too: it is under the dist directory (see Generate).
func (o *Options) resolve(f *File, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	if rest, ok := strings.CutPrefix(filepath.ToSlash(p), f.Dist+"/"); ok {
		return filepath.Join(o.Dist, rest)
	}
	if strings.HasPrefix(filepath.ToSlash(p), generatedDir+"/") {
		return filepath.Join(o.Dist, p)
	}
	return filepath.Join(o.Repo, p)
}

func (o *Options) resolveOpt(f *File, p string) string {
	if p == "" {
		return ""
	}
	return o.resolve(f, p)
}

func (o *Options) packageOne(f *File, n *NFPM, arch, format string) (Artifact, error) {
	info, err := o.Info(f, n, arch, format)
	if err != nil {
		return Artifact{}, err
	}
	pkgr, err := nfpm.Get(format)
	if err != nil {
		return Artifact{}, err
	}
	data := o.templateData(f, arch)
	data["ConventionalFileName"] = pkgr.ConventionalFileName(info)
	tmpl := n.FileNameTemplate
	if tmpl == "" {
		tmpl = "{{ .ConventionalFileName }}"
	}
	name, err := expand("nfpms."+n.ID+".file_name_template", tmpl, data)
	if err != nil {
		return Artifact{}, err
	}
	if ext := "." + format; !strings.HasSuffix(name, ext) {
		name += ext
	}
	dst := filepath.Join(o.Dist, name)
	if err := os.MkdirAll(o.Dist, 0o755); err != nil {
		return Artifact{}, fmt.Errorf("creating %s: %w", o.Dist, err)
	}
	tmp := dst + ".new"
	w, err := os.Create(tmp)
	if err != nil {
		return Artifact{}, fmt.Errorf("creating %s: %w", tmp, err)
	}
	if err := pkgr.Package(info, w); err != nil {
		w.Close()
		os.Remove(tmp)
		return Artifact{}, fmt.Errorf("packaging %s: %w", dst, err)
	}
	if err := w.Close(); err != nil {
		os.Remove(tmp)
		return Artifact{}, fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return Artifact{}, fmt.Errorf("renaming %s: %w", tmp, err)
	}
	sum, err := fileSHA256(dst)
	if err != nil {
		return Artifact{}, err
	}
	o.logf("%s %s: %s", format, arch, dst)
	return Artifact{Kind: format, Arch: arch, Path: dst, SHA256: sum}, nil
}
