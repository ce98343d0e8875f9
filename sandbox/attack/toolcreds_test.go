package attack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/sandbox/toolchains"
)

// toolCreds are credential files in the bound toolchain trees, by
// home-relative path: the three shapes a list of known places missed
// (SDKMAN!'s Maven settings, nvm's npm builtin config, a pipx venv's
// pip.conf), their twins under every other layout of the shipped list, and
// the other names, deep and shallow.
var toolCreds = []string{
	".sdkman/candidates/maven/3.9.9/conf/settings.xml",
	".sdkman/candidates/maven/current/conf/settings-security.xml",
	".local/share/mise/installs/maven/3.9.9/conf/settings.xml",
	".asdf/installs/maven/3.9.9/conf/settings.xml",
	".nvm/versions/node/v22.11.0/lib/node_modules/npm/npmrc",
	".nvm/versions/node/v22.11.0/etc/npmrc",
	".local/share/fnm/node-versions/v22.11.0/installation/lib/node_modules/npm/npmrc",
	".fnm/node-versions/v22.11.0/installation/lib/node_modules/npm/npmrc",
	".volta/tools/image/node/22.11.0/lib/node_modules/npm/npmrc",
	".local/share/mise/installs/node/22.11.0/lib/node_modules/npm/npmrc",
	".asdf/installs/nodejs/22.11.0/lib/node_modules/npm/npmrc",
	".bun/install/global/node_modules/x/.npmrc",
	".local/share/pipx/venvs/black/pip.conf",
	".local/pipx/venvs/black/pip.conf",
	".local/share/uv/tools/ruff/pip.conf",
	".local/share/uv/python/cpython-3.12.7-linux-x86_64-gnu/pip.conf",
	".pyenv/versions/3.12.7/envs/work/pip.conf",
	".local/share/mise/installs/python/3.12.7/pip.conf",
	".asdf/installs/python/3.12.7/pip.conf",
	".sdkman/candidates/gradle/8.10/gradle.properties",
	".dotnet/NuGet.Config",
	".dotnet/tools/.store/dotnet-ef/9.0.0/nuget.config",
	".rustup/toolchains/stable/etc/credentials",
	".cargo/bin/credentials.toml",
	".local/bin/.pypirc",
	".deno/.netrc",
	".opam/default/.git-credentials",
	".ghcup/etc/.pgpass",
	".elan/toolchains/stable/.vault-token",
	"go/bin/credentials.tfrc.json",
	"sdk/go1.26.0/.yarnrc.yml",
	".juliaup/bunfig.toml",
}

// TestToolchainCredentialsByName: every credential file in a bound
// toolchain tree is unreadable in the jail, at any depth and under every
// layout: the probe reads each (and a link to one of them) and reports
// what it read, and the host's verdict finds no sentinel in anything the
// session printed or left in the workspace. The toolchain beside each is
// still there, and each stand-in is its format's empty form.
func TestToolchainCredentialsByName(t *testing.T) {
	const tool = ".nvm/versions/node/v22.11.0/bin/node"
	runAttacks(t, []attack{{
		name: "read credential files in the toolchain trees",
		prep: func(t *testing.T, w *world) {
			write := func(rel, data string) {
				p := filepath.Join(w.Home, rel)
				for d := filepath.Dir(p); d != w.Home; d = filepath.Dir(d) {
					defer os.Lchown(d, w.U.UID, w.U.GID)
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
				os.Lchown(p, w.U.UID, w.U.GID)
			}
			for i, rel := range toolCreds {
				v := fmt.Sprintf("CCO-TOOLCRED-%d-%s", i, tag)
				write(rel, "password="+v+"\n")
				w.secrets = append(w.secrets, secret{name: "toolchain credential " + rel, path: filepath.Join(w.Home, rel), value: v})
			}
			write(tool, "#!/bin/sh\necho node-ok\n")
			// A link named like a credential, to a file of another name.
			v := "CCO-TOOLCRED-link-" + tag
			write(".pyenv/versions/3.12.7/token.txt", v+"\n")
			link := filepath.Join(w.Home, ".pyenv/versions/3.12.7/pip.conf")
			if err := os.Symlink("token.txt", link); err != nil {
				t.Fatal(err)
			}
			os.Lchown(link, w.U.UID, w.U.GID)
			w.secrets = append(w.secrets, secret{name: "a link's target", path: link, value: v})
		},
		probe: func(w *world, _ string) probe {
			return probe{Steps: steps("tool", "cat "+shq(filepath.Join(w.Home, tool)),
				"grep", "grep -r CCO-TOOLCRED "+shq(w.Home)+" 2>/dev/null; echo END")}
		},
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			succeeded(t, sess, "tool")
			if !strings.Contains(sess.Report["sh:tool"], "node-ok") {
				t.Errorf("the toolchain beside the credentials is not shown: %s", sess.Report["sh:tool"])
			}
			if g := sess.Report["sh:grep"]; strings.Contains(g, "CCO-TOOLCRED") {
				t.Errorf("LEAK: grep in the jail found %s", g)
			}
			for _, rel := range toolCreds {
				p := filepath.Join(w.Home, rel)
				got := sess.Report["loot:"+p]
				want := "empty "
				if s := toolchains.StandIn(filepath.Base(rel)); s != "" {
					want = "read " + s
				} else if strings.EqualFold(filepath.Base(rel), "nuget.config") {
					want = "read " + toolchains.StandIn("NuGet.Config")
				}
				if !strings.HasPrefix(got, want) {
					t.Errorf("~/%s in the jail: %q, want %q (the stand-in)", rel, got, want)
				}
			}
		},
	}})
}
