package guard

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/sandbox"
)

// jsonOnly fails unless stdout is empty or exactly one JSON object: Gemini
// CLI parses a hook's whole stdout as JSON.
func jsonOnly(t *testing.T, stdout string) map[string]any {
	t.Helper()
	if strings.TrimSpace(stdout) == "" {
		return nil
	}
	var v map[string]any
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("stdout %q is not JSON: %v", stdout, err)
	}
	if dec.More() {
		t.Fatalf("stdout %q holds more than one JSON value", stdout)
	}
	return v
}

// The guard's answers in the form Gemini CLI reads, for each path: inside
// the jail the BeforeAgent gate exits 0 with nothing on stdout (allow);
// outside it exits 2 with the reason on stderr alone, which Gemini CLI
// prints as "Agent execution blocked: <reason>"; the SessionStart verifier
// exits 0 with one systemMessage object, which Gemini CLI shows.
func TestGeminiAnswerForm(t *testing.T) {
	t.Run("gate inside", func(t *testing.T) {
		seams(t)
		probeJail = func() (*sandbox.Marker, error) {
			return &sandbox.Marker{Schema: 1, Agent: "gemini", Egress: "off"}, nil
		}
		code, out, errOut := runHook(HookPromptGate, []string{"gemini"}, geminiPrompt)
		if code != 0 || out != "" || errOut != "" {
			t.Fatalf("exit %d stdout %q stderr %q, want a silent 0", code, out, errOut)
		}
	})
	t.Run("gate outside", func(t *testing.T) {
		seams(t)
		code, out, errOut := runHook(HookPromptGate, []string{"gemini"}, geminiPrompt)
		if code != 2 || out != "" {
			t.Fatalf("exit %d stdout %q, want 2 and nothing on stdout", code, out)
		}
		reason := strings.TrimSpace(errOut)
		if strings.Contains(reason, "\n") || !strings.HasPrefix(reason, "cco guard: blocked: this gemini is not running inside a cco jail") {
			t.Fatalf("stderr %q: want one line that says why and names gemini", errOut)
		}
		if json.Valid([]byte(reason)) {
			t.Fatal("the reason parses as JSON: Gemini CLI would read it as a hook answer")
		}
		if !strings.Contains(reason, "start it as `gemini` from "+ShadowDir) {
			t.Errorf("stderr %q does not name the fix: gemini from %s", reason, ShadowDir)
		}
	})
	t.Run("verifier outside", func(t *testing.T) {
		seams(t)
		code, out, _ := runHook(HookSessionStart, []string{"gemini"}, geminiSessionStart)
		v := jsonOnly(t, out)
		if code != 0 || v == nil || !strings.Contains(v["systemMessage"].(string), "WARNING") {
			t.Fatalf("exit %d stdout %q, want 0 and a systemMessage warning", code, out)
		}
	})
	t.Run("verifier inside", func(t *testing.T) {
		seams(t)
		procDir = fakeProc(t, "bwrap", "    lo: 0 0 0\n")
		environ = func() []string { return []string{"HOME=" + t.TempDir(), "GEMINI_API_KEY=x"} }
		probeJail = func() (*sandbox.Marker, error) {
			return &sandbox.Marker{Schema: 1, Agent: "gemini", Egress: "off"}, nil
		}
		code, out, _ := runHook(HookSessionStart, []string{"gemini"}, geminiSessionStart)
		v := jsonOnly(t, out)
		if code != 0 || v == nil || !strings.Contains(v["systemMessage"].(string), "inside a cco jail for gemini") && !strings.Contains(v["systemMessage"].(string), "jail check FAILED") {
			t.Fatalf("exit %d stdout %q, want 0 and the jail report", code, out)
		}
		if strings.Contains(v["systemMessage"].(string), "GEMINI_API_KEY") {
			t.Errorf("gemini's own key is reported as a leak: %s", v["systemMessage"])
		}
	})
}

// In gemini's jail its own credential variables pass and every other
// agent's, and the host's, are reported; another agent's login file that
// the jail shows is reported, and gemini's own are refused in the others'.
func TestGeminiVerifierCredentials(t *testing.T) {
	gem := &sandbox.Marker{Schema: 1, Agent: "gemini", Egress: "off"}
	cl := &sandbox.Marker{Schema: 1, Agent: "claude", Egress: "off"}
	if err := checkEnvTokens(gem, map[string]string{"GEMINI_API_KEY": "x", "GOOGLE_API_KEY": "x", "GOOGLE_APPLICATION_CREDENTIALS": "/k.json"}); err != nil {
		t.Errorf("gemini's own variables reported: %v", err)
	}
	if err := checkEnvTokens(gem, map[string]string{"ANTHROPIC_API_KEY": "x", "OPENAI_API_KEY": "y"}); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY, OPENAI_API_KEY") {
		t.Errorf("other agents' keys in gemini's jail: %v", err)
	}
	if err := checkEnvTokens(cl, map[string]string{"GEMINI_API_KEY": "x"}); err == nil || !strings.Contains(err.Error(), "GEMINI_API_KEY") {
		t.Errorf("gemini's key in claude's jail: %v", err)
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini/oauth_creds.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkOtherLogin(gem, map[string]string{"HOME": home}); err != nil {
		t.Errorf("gemini's own login reported in its jail: %v", err)
	}
	if err := checkOtherLogin(cl, map[string]string{"HOME": home}); err == nil || !strings.Contains(err.Error(), ".gemini/oauth_creds.json is readable") {
		t.Errorf("gemini's login in claude's jail: %v", err)
	}
}
