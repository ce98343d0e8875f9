package vendorfetch

// AgentDroid is the agent table's name for Factory's Droid, whose native
// build an npm registry serves in a platform package.
const AgentDroid = "droid"

// DroidDir holds Droid's versions on the target system.
const DroidDir = LibexecDir + "/droid"

// droidLayout: @factory/cli lists @factory/cli-<platform> (linux-x64,
// linux-x64-baseline, linux-arm64; no musl build), whose package/bin/droid
// is the Bun-compiled binary.
func droidLayout() npmLayout {
	return npmLayout{
		pkg:         NpmDroid,
		native:      true,
		platformKey: func(t string) string { return NpmDroid + "-" + t },
		sub:         func(string) string { return "package/bin" },
		only:        []string{AgentDroid},
		validate:    nativeBinary(AgentDroid),
		target: func(p string) string {
			if p == "linux-x64" && !hasAVX2() {
				return "linux-x64-baseline"
			}
			return p
		},
	}
}
