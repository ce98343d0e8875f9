package vendorfetch

// AgentPi is the agent table's name for Pi, a Node program that an npm
// registry serves with its dependency tree.
const AgentPi = "pi"

// PiDir holds Pi's versions on the target system: each a node_modules tree
// with the package and its dependencies, the lockfile it was installed
// from, and the interpreter link.
const PiDir = LibexecDir + "/pi"

// piLayout: the package and every package of the tree npm resolves for it
// (tree), each verified and unpacked by cco; Node runs it (node).
func piLayout() npmLayout {
	return npmLayout{
		pkg:      NpmPi,
		tree:     true,
		node:     true,
		validate: validateTree(NpmPi),
		target:   func(p string) string { return p },
	}
}
