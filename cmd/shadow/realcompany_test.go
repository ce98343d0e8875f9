package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/realagents"
)

// messagesStandIn is a stand-in for Anthropic's Messages API, as a
// company's gateway serves it: to a request that offers the Bash tool it
// answers (as Server-Sent Events) with a tool_use running proofCommand;
// to the request that carries that tool's result it answers end_turn with
// finalAnswer, once the result holds proofOutput. Every other request
// (a title, a quota probe) gets a short text.
type messagesStandIn struct {
	mu         sync.Mutex
	requests   []string // method and path of each request
	toolResult string   // the Bash tool's result, as the agent sent it
	answered   bool     // the final answer was served
}

const (
	proofCommand = "echo company-proof-$((6*7)) > proof.txt && cat proof.txt"
	proofOutput  = "company-proof-42"
	finalAnswer  = "STANDIN-FINAL-ANSWER: the tool ran"
)

func (s *messagesStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		if strings.HasSuffix(r.URL.Path, "/count_tokens") {
			fmt.Fprint(w, `{"input_tokens": 10}`)
			return
		}
		http.NotFound(w, r)
		return
	}
	var req struct {
		Stream   bool `json:"stream"`
		Tools    []struct{ Name string }
		Messages []struct {
			Role    string
			Content json.RawMessage
		}
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	hasBash := false
	for _, tl := range req.Tools {
		hasBash = hasBash || tl.Name == "Bash"
	}
	result := ""
	if n := len(req.Messages); n > 0 {
		var blocks []struct {
			Type      string
			ToolUseID string `json:"tool_use_id"`
			Content   json.RawMessage
		}
		if json.Unmarshal(req.Messages[n-1].Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type == "tool_result" && b.ToolUseID == "toolu_cco_1" {
					result = string(b.Content)
				}
			}
		}
	}
	switch {
	case result != "":
		s.mu.Lock()
		s.toolResult = result
		ok := strings.Contains(result, proofOutput)
		s.answered = s.answered || ok
		s.mu.Unlock()
		text := finalAnswer
		if !ok {
			text = "STANDIN-WRONG-RESULT"
		}
		s.reply(w, req.Stream, `{"type":"text","text":""}`, `{"type":"text_delta","text":`+jsonString(text)+`}`, "end_turn")
	case hasBash:
		input := jsonString(`{"command": ` + jsonString(proofCommand) + `, "description": "Write the proof file"}`)
		s.reply(w, req.Stream, `{"type":"tool_use","id":"toolu_cco_1","name":"Bash","input":{}}`, `{"type":"input_json_delta","partial_json":`+input+`}`, "tool_use")
	default:
		s.reply(w, req.Stream, `{"type":"text","text":""}`, `{"type":"text_delta","text":"ok"}`, "end_turn")
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// reply answers with one content block (start, one delta) and the stop
// reason: as SSE when the request streams, else as one JSON message.
func (s *messagesStandIn) reply(w http.ResponseWriter, stream bool, start, delta, stop string) {
	if !stream {
		var block map[string]any
		json.Unmarshal([]byte(start), &block)
		var d map[string]any
		json.Unmarshal([]byte(delta), &d)
		if t, ok := d["text"]; ok {
			block["text"] = t
		}
		if pj, ok := d["partial_json"].(string); ok {
			var in any
			json.Unmarshal([]byte(pj), &in)
			block["input"] = in
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "msg_cco", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 10, "output_tokens": 5}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	f, _ := w.(http.Flusher)
	ev := func(name, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		if f != nil {
			f.Flush()
		}
	}
	ev("message_start", `{"type":"message_start","message":{"id":"msg_cco","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":`+start+`}`)
	ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":`+delta+`}`)
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":5}}`)
	ev("message_stop", `{"type":"message_stop"}`)
}

// TestRealClaudeOnACompanyNetwork: the real Claude Code (the pinned pack)
// through the shadow, as uid 65534 and as root, in a company network of
// the test's own namespace, against a stand-in for the Messages API that
// has it run its Bash tool and then ends the turn: once on the host's
// loopback (ANTHROPIC_BASE_URL=http://127.0.0.1:PORT, LiteLLM's quick
// start), once as an HTTPS gateway only the company's proxy reaches
// (egress_upstream with Basic auth, the company's CA in
// NODE_EXTRA_CA_CERTS). The stand-in checks the tool's result; the proof
// file is on the host, the company proxy's log has the tunnel.
func TestRealClaudeOnACompanyNetwork(t *testing.T) {
	realagents.Require(t)
	pkg := filepath.Join(realagents.Dir(t, realagents.Claude), filepath.Dir(realagents.ClaudeBinary))
	n := newCompanyNet(t)
	dir := corpDir(t)
	caFile, cert := corpCA(t, dir, "llm.corp.test")
	const pass = "Corp-Pa55w0rd"
	passEnv := "pass_env = [\"ANTHROPIC_API_KEY\", \"CLAUDE_CODE_MAX_RETRIES\", \"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC\", \"NODE_EXTRA_CA_CERTS\"]\n"
	root := realAgentRoot(t, "claude", pkg, passEnv)
	for _, place := range []string{"loopback", "upstream"} {
		standIn := &messagesStandIn{}
		l := n.listen(t, "tcp4", "127.0.0.1:0")
		base := "http://" + l.Addr().String()
		var corp *corpProxy
		cfg := passEnv
		if place == "upstream" {
			serveHTTP(t, l, standIn, &cert)
			corp = newCorpProxy(t, n, "ada", pass, map[string]string{"llm.corp.test": l.Addr().String()})
			base = "https://llm.corp.test"
			cfg += fmt.Sprintf("egress_upstream = \"http://ada:%s@%s\"\n", pass, corp.addr)
		} else {
			serveHTTP(t, l, standIn, nil)
		}
		if err := os.WriteFile(filepath.Join(root, "etc/cco/sandbox.toml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, u := range []runAs{asNobody, asRoot} {
			t.Run(place+"/"+u.name, func(t *testing.T) {
				standIn.mu.Lock()
				standIn.answered, standIn.toolResult, standIn.requests = false, "", nil
				standIn.mu.Unlock()
				w := newWorld(t, u)
				c := w.cmd(root, "claude", w.ws, "-p", "Write the proof file with your Bash tool.", "--allowedTools", "Bash",
					"--output-format", "stream-json", "--verbose")
				c.Env = append(c.Env, "ANTHROPIC_API_KEY=sk-ant-dummy-key-for-an-offline-test", "ANTHROPIC_BASE_URL="+base,
					"CLAUDE_CODE_MAX_RETRIES=0", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "NODE_EXTRA_CA_CERTS="+caFile, "NO_COLOR=1")
				n.wrap(c, u)
				text := runUntil(t, c, filepath.Join(w.base, "claude.out"), func(s string) bool {
					return strings.Contains(s, finalAnswer) && strings.Contains(s, `"type":"result"`)
				})
				standIn.mu.Lock()
				answered, result, reqs := standIn.answered, standIn.toolResult, standIn.requests
				standIn.mu.Unlock()
				t.Logf("the stand-in: %d requests %q; the tool result %q", len(reqs), reqs, result)
				if !answered {
					t.Fatalf("the stand-in never got the Bash tool's result with %q (result %q; requests %q):\n%s", proofOutput, result, reqs, text)
				}
				if !strings.Contains(text, finalAnswer) {
					t.Errorf("claude did not report the final answer:\n%s", text)
				}
				if b, err := os.ReadFile(filepath.Join(w.ws, "proof.txt")); err != nil || strings.TrimSpace(string(b)) != proofOutput {
					t.Errorf("the proof file on the host: %q %v", b, err)
				}
				if corp != nil {
					found := false
					for _, r := range corp.requests() {
						found = found || strings.HasPrefix(r, "CONNECT llm.corp.test:443 auth=Basic ")
					}
					if !found {
						t.Errorf("the company proxy's log has no tunnel to the gateway: %q", corp.requests())
					}
				}
				if strings.Contains(text, pass) {
					t.Errorf("the upstream's password is in the session's output")
				}
			})
		}
	}
}

// corpDir is a directory every user can read (the company's CA file).
func corpDir(t *testing.T) string {
	d := filepath.Join(testRoots, fmt.Sprintf("cco-corp-%d", time.Now().UnixNano()))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
