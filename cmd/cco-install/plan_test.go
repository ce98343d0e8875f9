package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
)

// With no key and nothing beside cco-install, each binary comes from where
// the package puts it, and with none of the three the error names them all.
// (The key and "beside cco-install" are in testdata/script/*_source.txtar;
// the package's path is a host path, so here it is moved to a temp dir.)
func TestBinarySourcePackagedCopy(t *testing.T) {
	root := provisiontest.Root(t, t.TempDir())
	for _, b := range []binary{shadowBinary, egressProxyBinary} {
		t.Run(b.name, func(t *testing.T) {
			t.Setenv("CCO_"+strings.ToUpper(b.key), "")
			cfg := loadConfig(root, nil)
			if err := cfg.Err(); err != nil {
				t.Fatal(err)
			}
			b.packaged = filepath.Join(t.TempDir(), "lib", b.name)
			if _, _, err := b.find(cfg); err == nil || !strings.Contains(err.Error(), "no "+b.what+" binary: not set by "+b.key+", no '"+b.name+"' beside cco-install, and no "+b.packaged) {
				t.Fatalf("err = %v, want one naming the key, the name beside cco-install and %s", err, b.packaged)
			}
			os.MkdirAll(filepath.Dir(b.packaged), 0o755)
			if err := os.WriteFile(b.packaged, []byte("packaged"), 0o755); err != nil {
				t.Fatal(err)
			}
			if p, why, err := b.find(cfg); err != nil || p != b.packaged || why != "the package's copy" {
				t.Fatalf("find = %q, %q, %v; want %s, the package's copy", p, why, err, b.packaged)
			}
		})
	}
}

// The egress proxy is installed right after the in-sandbox helper, like it:
// same mode and owner, from its own source.
func TestPlanInstallsEgressProxyAfterHelper(t *testing.T) {
	run := provisiontest.Run(t, t.TempDir())
	root := run.Root
	shadow, proxy := filepath.Join(t.TempDir(), "shadow"), filepath.Join(t.TempDir(), "egress-proxy")
	os.WriteFile(shadow, []byte("shadow"), 0o755)
	os.WriteFile(proxy, []byte("proxy"), 0o755)
	t.Setenv("CCO_SHADOW_PATH", shadow)
	t.Setenv("CCO_EGRESS_PROXY_PATH", proxy)
	t.Setenv("CCO_AGENTS", "")
	t.Setenv("CCO_IMAGE", "no")
	cfg := loadConfig(root, nil)
	if err := cfg.Err(); err != nil {
		t.Fatal(err)
	}
	steps, err := buildPlan(run.ReadOnly(), cfg, &options{noAppArmor: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		if s.ID() != "sandbox.helper" {
			continue
		}
		if i+1 == len(steps) || steps[i+1].ID() != "sandbox.egress_proxy" {
			t.Fatalf("the step after sandbox.helper is not sandbox.egress_proxy")
		}
		h, p := s.(*provision.File), steps[i+1].(*provision.File)
		if p.Path != EgressProxyPath || p.SourcePath != proxy || p.Mode != h.Mode || p.UID != h.UID || p.GID != h.GID {
			t.Fatalf("egress proxy step %+v; helper %+v", p, h)
		}
		return
	}
	t.Fatal("no sandbox.helper step")
}
