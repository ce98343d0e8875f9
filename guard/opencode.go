package guard

import _ "embed"

// OpencodePluginPath is where cco-install puts the guard's OpenCode plugin:
// beside the hook scripts it runs, root-owned and read-only in a jail.
const OpencodePluginPath = Dir + "/opencode.js"

// OpencodePluginURL is how OpenCode's managed config names the plugin.
const OpencodePluginURL = "file://" + OpencodePluginPath

// opencodePlugin is the plugin: an ES module that runs the SessionStart
// verifier when a session is created and the gate before every prompt,
// throwing (which aborts the request) when the gate does not answer 0.
//
//go:embed opencode.js
var opencodePlugin []byte

// OpencodePlugin is the plugin file's content.
func OpencodePlugin() []byte { return append([]byte(nil), opencodePlugin...) }
