package vendorfetch

// AgentGemini is the agent table's name for Gemini CLI, which an npm
// registry serves (npm.go holds its source).
const AgentGemini = "gemini"
