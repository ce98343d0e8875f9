package release

import (
	"strings"
	"testing"
)

// The repository's goreleaser.yaml says what a release must be.
func TestRepoFileIsTheRelease(t *testing.T) {
	f, err := Load("../../goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !contains(f.Env, "CGO_ENABLED=0") {
		t.Errorf("env %v: want CGO_ENABLED=0", f.Env)
	}
	for _, id := range []string{"cco-install", "shadow", "egress-proxy"} {
		b, ok := f.BuildByID(id)
		if !ok {
			t.Fatalf("no build %q", id)
		}
		if b.Main != "./cmd/"+id || b.Binary != id {
			t.Errorf("%s: main %q binary %q", id, b.Main, b.Binary)
		}
		if strings.Join(b.Goarch, ",") != "amd64,arm64" {
			t.Errorf("%s goarch %v", id, b.Goarch)
		}
		if !contains(b.Flags, "-trimpath") {
			t.Errorf("%s flags %v: want -trimpath", id, b.Flags)
		}
		if !strings.Contains(strings.Join(b.Ldflags, " "), "-X github.com/cco-dev/cco/provision.Version={{ .Version }}") {
			t.Errorf("%s ldflags %v do not stamp the version", id, b.Ldflags)
		}
		if b.ModTimestamp != "{{ .CommitTimestamp }}" {
			t.Errorf("%s mod_timestamp %q", id, b.ModTimestamp)
		}
	}
	if len(f.NFPMs) != 1 {
		t.Fatalf("nfpms: %d entries", len(f.NFPMs))
	}
	n := f.NFPMs[0]
	if strings.Join(n.Formats, ",") != "deb,rpm" || n.Bindir != "/usr/bin" || strings.Join(n.Dependencies, ",") != "bubblewrap" {
		t.Errorf("nfpm: formats %v bindir %q depends %v", n.Formats, n.Bindir, n.Dependencies)
	}
	if strings.Join(n.IDs, ",") != "cco-install" {
		t.Errorf("nfpm ids %v: only cco-install belongs in bindir", n.IDs)
	}
	// The shadow and the egress proxy are off PATH, where cco-install finds them.
	for _, id := range []string{"shadow", "egress-proxy"} {
		found := false
		for _, c := range n.Contents {
			if strings.HasPrefix(c.Src, "dist/"+id+"_") && strings.HasSuffix(c.Src, "/"+id) {
				found = true
				if c.Dst != "/usr/lib/cco/" || c.FileInfo.Mode != 0o755 {
					t.Errorf("%s: dst %q mode %v, want /usr/lib/cco/ 0755", id, c.Dst, c.FileInfo.Mode)
				}
			}
		}
		if !found {
			t.Errorf("the packages lack the %s binary: %+v", id, n.Contents)
		}
	}
	var archives []struct {
		IDs []string `yaml:"ids"`
	}
	if err := f.Archives.Decode(&archives); err != nil || len(archives) != 1 || strings.Join(archives[0].IDs, ",") != "cco-install,shadow,egress-proxy" {
		t.Errorf("archives %+v (%v): want one with every build", archives, err)
	}
	if n.Scripts.PostInstall != "packaging/postinstall.sh" || n.Scripts.PreRemove != "packaging/preremove.sh" {
		t.Errorf("scripts %+v", n.Scripts)
	}
	if f.Checksum.NameTemplate == "" {
		t.Error("no checksum file")
	}
}

func TestParseRefuses(t *testing.T) {
	good := `version: 2
project_name: p
builds:
  - {id: a, main: ./a, binary: a, goos: [linux], goarch: [amd64]}
nfpms:
  - {id: n, package_name: p, bindir: /usr/bin, formats: [deb], ids: [a]}
`
	if _, err := Parse("g.yaml", []byte(good)); err != nil {
		t.Fatalf("good file: %v", err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown nfpm field", "formats: [deb]", "formats: [deb], recommends: [x]", "recommends"},
		{"unknown build field", "binary: a,", "binary: a, gcflags: [-N],", "gcflags"},
		{"version 1", "version: 2", "version: 1", "want 2"},
		{"other os", "goos: [linux]", "goos: [darwin]", "want [linux]"},
		{"other arch", "goarch: [amd64]", "goarch: [riscv64]", "riscv64"},
		{"unknown id", "ids: [a]", "ids: [b]", `"b"`},
		{"apk", "formats: [deb]", "formats: [apk]", "apk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("g.yaml", []byte(strings.Replace(good, tc.from, tc.to, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "g.yaml") {
				t.Fatalf("err = %v, want one naming g.yaml and %s", err, tc.want)
			}
		})
	}
}

func TestExpandRefusesUnknownFields(t *testing.T) {
	data := map[string]any{"Version": "1.0.0"}
	if s, err := expand("x", "v{{ .Version }}", data); err != nil || s != "v1.0.0" {
		t.Fatalf("expand = %q, %v", s, err)
	}
	_, err := expand("nfpms.x.mtime", "{{ .Tag }}", data)
	if err == nil || !strings.Contains(err.Error(), "nfpms.x.mtime") || !strings.Contains(err.Error(), ".Version") {
		t.Fatalf("err = %v, want the field and the known names", err)
	}
}
