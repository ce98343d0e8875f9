package vendorfetch

// AgentGemini is the agent table's name for Gemini CLI, which an npm
// registry serves (npm.go holds its source).
const AgentGemini = "gemini"

// GeminiDir holds Gemini CLI's versions on the target system.
const GeminiDir = LibexecDir + "/gemini"

// GeminiEntry is the script of a Gemini CLI version that Node runs.
const GeminiEntry = "bundle/gemini.js"
