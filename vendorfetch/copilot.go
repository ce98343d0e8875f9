package vendorfetch

import "strings"

// AgentCopilot is the agent table's name for GitHub Copilot CLI, whose
// native build (a Node single-executable) an npm registry serves in a
// platform package.
const AgentCopilot = "copilot"

// CopilotDir holds Copilot CLI's versions on the target system.
const CopilotDir = LibexecDir + "/copilot"

// copilotLayout: @github/copilot lists @github/copilot-linux-<arch> and
// @github/copilot-linuxmusl-<arch>, whose package/copilot is the binary.
func copilotLayout() npmLayout {
	return npmLayout{
		pkg:    NpmCopilot,
		native: true,
		platformKey: func(t string) string {
			arch, _ := platformArch(t)
			if strings.HasSuffix(t, "-musl") {
				return NpmCopilot + "-linuxmusl-" + arch
			}
			return NpmCopilot + "-linux-" + arch
		},
		sub:      func(string) string { return "package" },
		only:     []string{AgentCopilot},
		validate: nativeBinary(AgentCopilot),
		target:   func(p string) string { return p },
	}
}
