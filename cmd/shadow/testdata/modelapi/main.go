// Command modelapi is a stand-in for the Gemini API and OpenAI's Responses
// API on loopback, for the real Gemini CLI's and Codex's tests: its first
// turn asks the agent's shell tool to run -cmd, its next one ends the turn.
// Every request's path and body are appended to -log, where the test reads
// what the tool answered.
//
//	modelapi -addr 127.0.0.1:PORT -cmd 'go version' -log FILE
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	cmd := flag.String("cmd", "true", "the command the model asks the shell tool to run")
	logf := flag.String("log", "/dev/null", "the request log")
	flag.Parse()
	log, err := os.OpenFile(*logf, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o666)
	if err != nil {
		fmt.Fprintln(os.Stderr, "modelapi:", err)
		os.Exit(1)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(log, "%s %s\n%s\n", r.Method, r.URL.Path, body)
		switch {
		case strings.HasSuffix(r.URL.Path, "/responses"):
			responses(w, body, *cmd)
		case strings.HasSuffix(r.URL.Path, ":countTokens"):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"totalTokens": 10}`)
		case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
			w.Header().Set("Content-Type", "text/event-stream")
			var part any = map[string]any{"text": "All done."}
			if !strings.Contains(string(body), `"functionResponse":`) {
				part = map[string]any{"functionCall": map[string]any{"name": "run_shell_command", "args": map[string]any{"command": *cmd, "description": "run it"}}}
			}
			b, _ := json.Marshal(map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
				"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		case strings.HasSuffix(r.URL.Path, ":generateContent"):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"{\"next_speaker\": \"user\", \"reasoning\": \"done\"}"}]},"finishReason":"STOP","index":0}]}`)
		default:
			http.NotFound(w, r)
		}
	})
	if err := http.ListenAndServe(*addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "modelapi:", err)
		os.Exit(1)
	}
}

// responses answers a Responses API request as Server-Sent Events: a call
// of the shell tool the request offers, or, once the request carries its
// output, a message that ends the turn.
func responses(w http.ResponseWriter, body []byte, cmd string) {
	var req struct {
		Tools []struct {
			Type, Name string
		} `json:"tools"`
	}
	json.Unmarshal(body, &req)
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
	}
	event(map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_1"}})
	var item map[string]any
	if strings.Contains(string(body), `"function_call_output"`) {
		item = map[string]any{"type": "message", "role": "assistant", "id": "msg_1",
			"content": []any{map[string]any{"type": "output_text", "text": "All done."}}}
	} else {
		name, args := "shell", map[string]any{"command": []string{"bash", "-lc", cmd}}
		for _, t := range req.Tools {
			switch t.Name {
			case "exec_command":
				name, args = t.Name, map[string]any{"cmd": cmd}
			case "shell_command":
				if name != "exec_command" {
					name, args = t.Name, map[string]any{"command": cmd}
				}
			}
		}
		a, _ := json.Marshal(args)
		item = map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name, "arguments": string(a)}
	}
	event(map[string]any{"type": "response.output_item.done", "item": item})
	event(map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1",
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}}})
}
