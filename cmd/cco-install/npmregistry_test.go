package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cco-dev/cco/vendorfetch"
	"github.com/cco-dev/cco/vendorfetch/npmtest"
)

// npmBox holds a script's npm registry (vendorfetch/npmtest) and the outer
// test it is made under: scripts run in parallel, each with its own.
type npmBox struct {
	t   *testing.T
	reg *npmtest.Registry
}

type npmKey struct{}

// scriptTB is the testing.TB npmtest is given for one script: its files go
// under the script's $WORK, its cleanups run when the script ends, and a
// failure fails the script, not the whole of TestScripts.
type scriptTB struct {
	*testing.T
	ts *testscript.TestScript
}

func (s scriptTB) Helper()                           {}
func (s scriptTB) Cleanup(f func())                  { s.ts.Defer(f) }
func (s scriptTB) Fatal(args ...any)                 { s.ts.Fatalf("%s", fmt.Sprint(args...)) }
func (s scriptTB) Fatalf(format string, args ...any) { s.ts.Fatalf(format, args...) }
func (s scriptTB) Errorf(format string, args ...any) { s.ts.Fatalf(format, args...) }
func (s scriptTB) Error(args ...any)                 { s.ts.Fatalf("%s", fmt.Sprint(args...)) }
func (s scriptTB) TempDir() string {
	d, err := os.MkdirTemp(s.ts.Getenv("WORK"), "npmregistry")
	s.ts.Check(err)
	return d
}

// npmFile is one member of a fake package's tarball, under package/.
type npmFile struct {
	name string
	mode int64
	link string
	body string
}

// npmPack is a gzipped tar of files, as npm packs them.
func npmPack(files []npmFile) []byte {
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg, ModTime: time.Unix(499162500, 0)}
		if f.link != "" {
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, f.link, 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		tw.WriteHeader(h)
		tw.Write([]byte(f.body))
	}
	tw.Close()
	gz.Close()
	return b.Bytes()
}

// npmPublish is what one publish verb puts on the registry: the release's
// main package and, for agents with per-platform builds, its builds for
// x64 and arm64 (the detected platform is the machine's). bad is applied
// to the package that carries the files (the build, else the main one).
func npmPublish(reg *npmtest.Registry, agent, version string, tags []string, bad func(*npmtest.Pub)) {
	stub := npmPack([]npmFile{{name: "package/package.json", body: "{}"}})
	switch agent {
	case "gemini":
		pj, _ := json.Marshal(map[string]any{"name": vendorfetch.NpmGemini, "version": version, "type": "module",
			"bin": map[string]string{"gemini": vendorfetch.GeminiEntry}, "engines": map[string]string{"node": ">=20"}})
		p := npmtest.Pub{Name: vendorfetch.NpmGemini, Version: version, Tags: tags, Engines: map[string]string{"node": ">=20"},
			Tarball: npmPack([]npmFile{
				{name: "package/package.json", body: string(pj)},
				{name: "package/" + vendorfetch.GeminiEntry, mode: 0o755, body: "#!/usr/bin/env node\nconsole.log(\"" + version + "\");\n"},
				{name: "package/bundle/chunk-1.js", body: "export const x = 1;\n"},
				{name: "package/LICENSE", body: "Apache-2.0\n"},
			})}
		bad(&p)
		reg.Publish(p)
	case "claude":
		opt := map[string]string{}
		for _, plat := range []string{"linux-x64", "linux-arm64"} {
			name := vendorfetch.NpmClaude + "-" + plat
			pj, _ := json.Marshal(map[string]any{"name": name, "version": version})
			p := npmtest.Pub{Name: name, Version: version, Tarball: npmPack([]npmFile{
				{name: "package/claude", mode: 0o755, body: string(fakeClaude(version))},
				{name: "package/package.json", body: string(pj)},
			})}
			bad(&p)
			reg.Publish(p)
			opt[name] = version
		}
		reg.Publish(npmtest.Pub{Name: vendorfetch.NpmClaude, Version: version, Tarball: stub, Optional: opt, Tags: tags})
	case "codex":
		opt := map[string]string{}
		for arch, target := range map[string]string{"x64": "x86_64-unknown-linux-musl", "arm64": "aarch64-unknown-linux-musl"} {
			pre := "package/vendor/" + target + "/"
			cp, _ := json.Marshal(map[string]any{"layoutVersion": 1, "version": version, "target": target, "entrypoint": "bin/codex"})
			build := version + "-linux-" + arch
			p := npmtest.Pub{Name: vendorfetch.NpmCodex, Version: build, Tarball: npmPack([]npmFile{
				{name: pre + "codex-package.json", body: string(cp)},
				{name: pre + "bin/codex", mode: 0o755, body: "#!/bin/sh\necho 'codex-cli " + version + "'\n"},
				{name: pre + "codex-path/rg", mode: 0o755, body: "#!/bin/sh\n"},
				{name: pre + "codex-resources/voice/lib/libz.so.1", mode: 0o755, body: "lib"},
				{name: pre + "codex-resources/voice/lib/libz.so", link: "libz.so.1"},
				{name: "package/package.json", body: `{"name": "@openai/codex"}`},
			})}
			bad(&p)
			reg.Publish(p)
			opt[vendorfetch.NpmCodex+"-linux-"+arch] = "npm:" + vendorfetch.NpmCodex + "@" + build
		}
		reg.Publish(npmtest.Pub{Name: vendorfetch.NpmCodex, Version: version, Tarball: stub, Optional: opt, Tags: tags})
	default:
		panic("npmregistry: no fake package for " + agent)
	}
}

// npmFaults are publish's options: what is wrong with the release.
var npmFaults = map[string]func(*npmtest.Pub){
	"-tampered":  func(p *npmtest.Pub) { p.IntegrityOf = []byte("not the published bytes") },
	"-untrusted": func(p *npmtest.Pub) { p.OtherKey = true },
	"-badsig":    func(p *npmtest.Pub) { p.SignAs = p.Name + "@" + p.Version + ":sha512-other" },
	"-unsigned":  func(p *npmtest.Pub) { p.NoSig = true },
}

// cmdNpmRegistry: "npmregistry start" serves an npm registry on loopback
// (vendorfetch/npmtest, signing with a key of its own) and sets
// $NPM_REGISTRY (its URL) and $NPM_KEYS (its keys file, for npm_keys);
// "npmregistry publish [-tampered|-untrusted|-badsig|-unsigned] AGENT
// VERSION [TAG...]" publishes a fake release of gemini, claude or codex,
// moving the dist-tags; "npmregistry requests N [PREFIX]" checks how many
// requests (with a path starting with PREFIX) it answered since the last
// check; "npmregistry stop" closes it.
func cmdNpmRegistry(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: npmregistry start|stop|publish [-FAULT] AGENT VERSION [TAG...]|requests N [PREFIX]")
	}
	box := ts.Value(npmKey{}).(*npmBox)
	if args[0] != "start" && box.reg == nil {
		ts.Fatalf("npmregistry %s: no registry (npmregistry start)", args[0])
	}
	switch args[0] {
	case "start":
		if box.reg != nil {
			ts.Fatalf("npmregistry start: already started")
		}
		box.reg = npmtest.New(scriptTB{T: box.t, ts: ts})
		ts.Setenv("NPM_REGISTRY", box.reg.URL())
		ts.Setenv("NPM_KEYS", box.reg.KeysFile)
		ts.Setenv("CCO_DOWNLOAD_BACKOFF", "10ms")
		ts.Setenv("CCO_DOWNLOAD_RETRIES", "1")
	case "stop":
		box.reg.Close()
	case "publish":
		args = args[1:]
		bad := func(*npmtest.Pub) {}
		if len(args) > 0 && strings.HasPrefix(args[0], "-") {
			f, ok := npmFaults[args[0]]
			if !ok {
				ts.Fatalf("npmregistry publish: unknown fault %s", args[0])
			}
			bad, args = f, args[1:]
		}
		if len(args) < 2 {
			ts.Fatalf("usage: npmregistry publish [-FAULT] AGENT VERSION [TAG...]")
		}
		npmPublish(box.reg, args[0], args[1], args[2:], bad)
	case "requests":
		var want int
		if len(args) < 2 {
			ts.Fatalf("usage: npmregistry requests N [PREFIX]")
		}
		fmt.Sscan(args[1], &want)
		prefix := ""
		if len(args) > 2 {
			prefix = args[2]
		}
		got := box.reg.Count(prefix)
		box.reg.Reset()
		if (got == want) == neg {
			ts.Fatalf("the registry answered %d requests for %q, want %d", got, prefix+"*", want)
		}
	default:
		ts.Fatalf("npmregistry: unknown verb %s", args[0])
	}
}

// cmdEnvsubst: "envsubst IN OUT" writes IN with $VAR and ${VAR} replaced
// by the script's environment: a file an operator writes with this
// machine's paths (install.toml naming the registry and its keys).
func cmdEnvsubst(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: envsubst IN OUT")
	}
	out := ts.MkAbs(args[1])
	ts.Check(os.MkdirAll(filepath.Dir(out), 0o755))
	ts.Check(os.WriteFile(out, []byte(os.Expand(ts.ReadFile(args[0]), ts.Getenv)), 0o644))
}
