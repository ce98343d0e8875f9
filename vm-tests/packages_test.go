package vmtests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cco-dev/cco/packaging/release"
	"github.com/cco-dev/cco/packaging/signing"
)

// The two builds the scenarios install: "old" is the previous release an
// upgrade starts from, "new" is this checkout.
const (
	oldVersion = "0.1.0"
	newVersion = "0.2.0"
)

// Build is one version's .deb and the shadow and egress proxy inside it.
type Build struct {
	Version     string
	Deb         string
	Shadow      []byte
	EgressProxy []byte
}

var (
	buildOnce sync.Once
	builds    map[string]*Build
	buildErr  error
	buildDir  string
	// standIns are the build ids (shadow, egress-proxy) that did not
	// compile; the packages carry a stand-in for each.
	standIns []string
)

// standInBuilds are the builds a scenario can run without: where one does
// not compile, a stand-in script is packaged in its place.
var standInBuilds = []string{"shadow", "egress-proxy"}

// skipIfStandIn skips a scenario that launches an agent: with a stand-in
// shadow or egress proxy packaged, no launch can work. It builds the
// packages first, which is what finds the stand-ins.
func skipIfStandIn(t *testing.T) {
	t.Helper()
	packages(t)
	if len(standIns) > 0 {
		t.Skipf("the packaged %s is a stand-in (does not compile)", strings.Join(standIns, " and "))
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range []string{buildDir, collectionTmp} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

// repo is the checkout the packages are built from.
func repo() string { return envOr("CCO_VM_REPO", "..") }

// packages builds both versions once per test binary with the release
// settings of goreleaser.yaml, compiling cco-install, the shadow and the
// egress proxy from this checkout.
func packages(t *testing.T) map[string]*Build {
	t.Helper()
	requireVM(t) // no compiling when the scenarios do not run
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "cco-vm-packages-")
		if buildErr != nil {
			return
		}
		for _, id := range standInBuilds {
			if compiles("./cmd/"+id) != nil {
				standIns = append(standIns, id)
			}
		}
		// The packages are signed as a release's are, with a throwaway key.
		key, err := signing.Generate("cco vm-tests release key", "release@cco-dev.invalid")
		if err != nil {
			buildErr = err
			return
		}
		keyFile := filepath.Join(buildDir, "release-key.asc")
		if buildErr = key.WriteSecret(keyFile); buildErr != nil {
			return
		}
		builds = map[string]*Build{}
		for _, v := range []string{oldVersion, newVersion} {
			b, err := buildVersion(v, keyFile)
			if err != nil {
				buildErr = err
				return
			}
			builds[v] = b
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, id := range standIns {
		t.Logf("NOTE: cmd/%s does not compile here; the packages carry a stand-in %s", id, id)
	}
	return builds
}

func buildVersion(v, keyFile string) (*Build, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f, err := release.Load(filepath.Join(repo(), "goreleaser.yaml"))
	if err != nil {
		return nil, err
	}
	o := &release.Options{Repo: repo(), Dist: filepath.Join(buildDir, v), Version: v,
		Arches: []string{hostArch()}, Formats: []string{"deb"}, Epoch: time.Unix(1700000000, 0), SigningKey: keyFile}
	for _, id := range standIns {
		p := filepath.Join(buildDir, id+"-stand-in-"+v)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n# stand-in "+id+" "+v+"\necho \"stand-in "+id+": $0\" >&2\nexit 126\n"), 0o755); err != nil {
			return nil, err
		}
		if o.Prebuilt == nil {
			o.Prebuilt = map[string]string{}
		}
		o.Prebuilt[id] = p
	}
	if _, err := release.BuildBinaries(ctx, f, o); err != nil {
		return nil, err
	}
	arts, err := release.Packages(ctx, f, o)
	if err != nil {
		return nil, err
	}
	b := &Build{Version: v}
	for _, a := range arts {
		if a.Kind == "deb" {
			b.Deb = a.Path
		}
	}
	if b.Deb == "" {
		return nil, fmt.Errorf("version %s: no deb among %v", v, arts)
	}
	if b.Shadow, err = builtBinary(o, "shadow"); err != nil {
		return nil, err
	}
	if b.EgressProxy, err = builtBinary(o, "egress-proxy"); err != nil {
		return nil, err
	}
	return b, nil
}

// builtBinary reads a build's binary from goreleaser's dist layout.
func builtBinary(o *release.Options, id string) ([]byte, error) {
	return os.ReadFile(filepath.Join(o.Dist, id+"_linux_"+hostArch()+map[string]string{"amd64": "_v1", "arm64": "_v8.0"}[hostArch()], id))
}

func compiles(pkg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", os.DevNull, pkg)
	cmd.Dir = repo()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v\n%s", pkg, err, out.String())
	}
	return nil
}

func hostArch() string {
	out, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		return "amd64"
	}
	return string(bytes.TrimSpace(out))
}
