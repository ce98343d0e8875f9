package guard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
)

// A stand-in for Factory's API, for the real Droid's TUI
// (TestRealDroidTUIBlockedUnwrapped): the TUI checks its API key before it
// starts.

// fakeFactoryEnv makes this test binary the stand-in API, listening on the
// address it names, and appending each request's method and path to
// <address's file> given in fakeFactoryLog.
const (
	fakeFactoryEnv = "CCO_GUARD_TEST_FAKE_FACTORY"
	fakeFactoryLog = "CCO_GUARD_TEST_FAKE_FACTORY_LOG"
)

// serveFakeFactory answers every request with an empty JSON object, but
// the key check (/api/cli/whoami), which gets a user and an org.
func serveFakeFactory(addr string) int {
	var mu sync.Mutex
	log, _ := os.OpenFile(os.Getenv(fakeFactoryLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if log != nil {
			log.WriteString(r.Method + " " + r.URL.Path + "\n")
		}
		mu.Unlock()
		if r.URL.Path == "/api/llm/o/v1/responses" {
			fakeModel(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/cli/whoami" {
			json.NewEncoder(w).Encode(map[string]string{"userId": "cco-test-user", "orgId": "cco-test-org"})
			return
		}
		w.Write([]byte("{}"))
	})
	if err := http.ListenAndServe(addr, h); err != nil && !errors.Is(err, http.ErrServerClosed) {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	return 0
}

// fakeModel answers Droid's model call (OpenAI's Responses API, streamed):
// the first call of a session asks for its Execute tool to run
// `touch <CCO_GUARD_TEST_FAKE_FACTORY_TOUCH>`, every later one says "done".
func fakeModel(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input []json.RawMessage `json:"input"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	args, _ := json.Marshal(map[string]string{"command": "touch " + os.Getenv("CCO_GUARD_TEST_FAKE_FACTORY_TOUCH"), "summary": "touch a file", "riskLevel": "low", "riskLevelReason": "a test"})
	item := map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "Execute", "arguments": string(args), "status": "completed"}
	for _, in := range req.Input {
		if strings.Contains(string(in), "call_1") {
			// The tool's result is in: the turn ends.
			item = map[string]any{"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
				"content": []map[string]any{{"type": "output_text", "text": "done", "annotations": []any{}}}}
		}
	}
	resp := map[string]any{"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "gpt-5.6-sol",
		"output": []any{item}, "usage": map[string]any{"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
			"input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 0}}}
	w.Header().Set("Content-Type", "text/event-stream")
	for i, ev := range []map[string]any{
		{"type": "response.created", "response": resp},
		{"type": "response.output_item.added", "output_index": 0, "item": item},
		{"type": "response.output_item.done", "output_index": 0, "item": item},
		{"type": "response.completed", "response": resp},
	} {
		ev["sequence_number"] = i
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev["type"], b)
	}
}
