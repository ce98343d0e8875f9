package release

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A real go build of a tiny module: the flags, the stamped version, the
// goreleaser dist layout and the fixed mtime.
func TestBuildBinaries(t *testing.T) {
	repo := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":        "module example.com/tiny\n\ngo 1.22\n",
		"cmd/t/main.go": "package main\n\nvar version = \"unset\"\n\nfunc main() { println(version) }\n",
	} {
		p := filepath.Join(repo, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Parse("g.yaml", []byte(`version: 2
project_name: tiny
env: [CGO_ENABLED=0]
builds:
  - id: t
    main: ./cmd/t
    binary: tee
    goos: [linux]
    goarch: [amd64, arm64]
    flags: [-trimpath]
    ldflags: ["-X main.version={{ .Version }}"]
    mod_timestamp: "{{ .CommitTimestamp }}"
`))
	if err != nil {
		t.Fatal(err)
	}
	epoch := time.Unix(1600000000, 0)
	o := &Options{Repo: repo, Version: "1.2.3", Arches: []string{"amd64"}, Epoch: epoch}
	arts, err := BuildBinaries(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(repo, "dist", "t_linux_amd64_v1", "tee")
	if len(arts) != 1 || arts[0].Path != want {
		t.Fatalf("artifacts %+v, want one at %s", arts, want)
	}
	fi, err := os.Stat(want)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.ModTime().Equal(epoch) {
		t.Errorf("mtime %v, want %v", fi.ModTime(), epoch)
	}
	out, err := exec.Command(want).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1.2.3" {
		t.Errorf("built binary says %q (%v), want the stamped version", out, err)
	}
	if b, _ := os.ReadFile(want); strings.Contains(string(b), repo) {
		t.Errorf("binary holds the build path %s: -trimpath was not applied", repo)
	}
}

func TestOptionsRefuse(t *testing.T) {
	f, err := Load("../../goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no version", Options{Epoch: time.Unix(1, 0)}, "no version"},
		{"leading v", Options{Version: "v1.0.0", Epoch: time.Unix(1, 0)}, "leading v"},
		{"no epoch", Options{Version: "1.0.0"}, "SOURCE_DATE_EPOCH"},
		{"bad arch", Options{Version: "1.0.0", Epoch: time.Unix(1, 0), Arches: []string{"s390x"}}, "s390x"},
		{"bad prebuilt", Options{Version: "1.0.0", Epoch: time.Unix(1, 0), Prebuilt: map[string]string{"nope": "/x"}}, `"nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			if _, err := BuildBinaries(context.Background(), f, &o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestEpoch(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1234")
	if e, err := Epoch("."); err != nil || e.Unix() != 1234 {
		t.Fatalf("Epoch = %v, %v", e, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "soon")
	if _, err := Epoch("."); err == nil || !strings.Contains(err.Error(), `"soon"`) {
		t.Fatalf("err = %v", err)
	}
}
