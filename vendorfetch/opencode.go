package vendorfetch

import "strings"

// AgentOpencode is the agent table's name for OpenCode, whose native build
// an npm registry serves in a platform package.
const AgentOpencode = "opencode"

// OpencodeDir holds OpenCode's versions on the target system.
const OpencodeDir = LibexecDir + "/opencode"

// opencodePlatforms is the prefix of OpenCode's platform packages
// (opencode-linux-x64, opencode-linux-x64-baseline-musl, ...), which its
// main package opencode-ai lists as optional dependencies.
const opencodePlatforms = "opencode-"

// opencodeLayout: the build for a target is the platform package of that
// name, whose package/bin/opencode is the Bun-compiled binary. An x64
// processor without AVX2 takes the baseline build, as the vendor's
// postinstall picks it.
func opencodeLayout() npmLayout {
	return npmLayout{
		pkg:         NpmOpencode,
		native:      true,
		platformKey: func(t string) string { return opencodePlatforms + t },
		sub:         func(string) string { return "package/bin" },
		only:        []string{AgentOpencode},
		validate:    nativeBinary(AgentOpencode),
		target: func(p string) string {
			if arch, _ := platformArch(p); arch == "x64" && !hasAVX2() {
				return strings.Replace(p, "x64", "x64-baseline", 1)
			}
			return p
		},
	}
}
