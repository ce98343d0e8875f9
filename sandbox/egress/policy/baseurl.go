package policy

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	agentpkg "github.com/cco-dev/cco/agent"
)

// maxConfigBytes bounds the agent's config file read for its base URL.
const maxConfigBytes = 1 << 20

// AgentLoopbackPorts are the ports of the agent's own provider endpoint
// where that is on the host's loopback: each base URL the agent reads
// (agent.BaseURLSources: its variables in environ, its TOML config under
// home) that names 127.0.0.1, localhost or [::1] with a port. Only this
// agent's: another agent's jail never gets them. An unreadable or
// malformed config file gives no port (the agent itself says what is
// wrong with it).
func AgentLoopbackPorts(agent, home string, environ []string) []int {
	src := agentpkg.BaseURLSources(agent)
	var urls []string
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && slices.Contains(src.Env, k) {
			urls = append(urls, v)
		}
	}
	if src.TOMLFile != "" && filepath.IsAbs(home) {
		urls = append(urls, tomlURLs(filepath.Join(home, src.TOMLFile), src.TOMLKeys)...)
	}
	var ports []int
	for _, u := range urls {
		if n := LoopbackPort(u); n > 0 && !slices.Contains(ports, n) {
			ports = append(ports, n)
		}
	}
	return ports
}

// LoopbackPort is the port of a base URL on the host's loopback
// (http or https, host 127.0.0.1, localhost or [::1], an explicit port
// other than the jail's proxy endpoint), or 0.
func LoopbackPort(raw string) int {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return 0
	}
	switch strings.ToLower(u.Hostname()) {
	case "127.0.0.1", "localhost", "::1":
	default:
		return 0
	}
	n, err := strconv.Atoi(u.Port())
	if err != nil || n < 1 || n > 65535 || n == EndpointPort {
		return 0
	}
	return n
}

// tomlURLs are the string values at keys ("a.*.b": any table name for
// "*") in the TOML file at path.
func tomlURLs(path string, keys []string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, maxConfigBytes+1)
	n, _ := f.Read(b)
	for n < len(b) {
		k, err := f.Read(b[n:])
		n += k
		if err != nil || k == 0 {
			break
		}
	}
	if n > maxConfigBytes {
		return nil
	}
	var doc map[string]any
	if _, err := toml.Decode(string(b[:n]), &doc); err != nil {
		return nil
	}
	var out []string
	for _, k := range keys {
		out = append(out, lookup(doc, strings.Split(k, "."))...)
	}
	return out
}

func lookup(v any, path []string) []string {
	if len(path) == 0 {
		if s, ok := v.(string); ok {
			return []string{s}
		}
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if path[0] != "*" {
		return lookup(m[path[0]], path[1:])
	}
	var out []string
	for _, sub := range m {
		out = append(out, lookup(sub, path[1:])...)
	}
	return out
}
