package cloudcreds

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
)

// helper is a stand-in for egress-proxy aws-credentials that answers out
// and records that it ran.
func helper(t *testing.T, out string) (path, ran string) {
	d := t.TempDir()
	ran = filepath.Join(d, "ran")
	path = filepath.Join(d, "helper")
	os.WriteFile(path, []byte("#!/bin/sh\n[ \"$1\" = "+AWSMode+" ] || exit 9\necho \"$AWS_PROFILE\" > "+ran+"\ncat <<'EOF'\n"+out+"\nEOF\n"), 0o755)
	return path, ran
}

func TestResolveAWS(t *testing.T) {
	claude, _ := agent.Lookup("claude")
	codex, _ := agent.Lookup("codex")
	h, ran := helper(t, `{"access_key_id":"AKID","secret_access_key":"sk","session_token":"st","region":"eu-west-1","expires":"2030-01-01T12:00:00Z"}`)
	host := &Host{Home: t.TempDir(), Helper: h, Now: func() time.Time { return time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC) },
		Environ: []string{"CLAUDE_CODE_USE_BEDROCK=1", "AWS_PROFILE=work"}}
	c, err := Resolve(claude, host, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=sk", "AWS_SESSION_TOKEN=st", "AWS_REGION=eu-west-1", "AWS_DEFAULT_REGION=eu-west-1"}
	if !slices.Equal(c.Env, want) || len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "2030-01-01 12:00 UTC") || !strings.Contains(c.Notes[0], "1h0m") {
		t.Errorf("env %q notes %q", c.Env, c.Notes)
	}
	if b, _ := os.ReadFile(ran); strings.TrimSpace(string(b)) != "work" {
		t.Errorf("the helper saw AWS_PROFILE %q", b)
	}
	// Another agent, the switch off, a gateway that signs, Bedrock's own
	// key: the helper does not run, and nothing is set.
	for _, c := range []struct {
		p   *agent.Profile
		env []string
	}{
		{codex, []string{"CLAUDE_CODE_USE_BEDROCK=1"}},
		{claude, []string{"CLAUDE_CODE_USE_BEDROCK=0"}},
		{claude, []string{"CLAUDE_CODE_USE_BEDROCK=1", "CLAUDE_CODE_SKIP_BEDROCK_AUTH=1"}},
		{claude, []string{"CLAUDE_CODE_USE_BEDROCK=1", "AWS_BEARER_TOKEN_BEDROCK=x"}},
	} {
		os.Remove(ran)
		got, err := Resolve(c.p, &Host{Home: host.Home, Helper: h, Environ: c.env}, nil)
		if _, statErr := os.Stat(ran); err != nil || len(got.Env) != 0 || statErr == nil {
			t.Errorf("%s %q: %v %q, helper ran %v", c.p.Name, c.env, err, got, statErr == nil)
		}
	}
	// The SDK's refusal comes back with the profile and a fix.
	bad, _ := helper(t, `{"error":"failed to refresh cached credentials, no EC2 IMDS role found"}`)
	_, err = Resolve(claude, &Host{Home: host.Home, Helper: bad, Environ: []string{"CLAUDE_CODE_USE_BEDROCK=true", "AWS_PROFILE=gone"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "gone") || !strings.Contains(err.Error(), "IMDS") || !strings.Contains(err.Error(), "fix: sign in on the host") {
		t.Errorf("a failing profile: %v", err)
	}
}

func TestResolveGoogle(t *testing.T) {
	gemini, _ := agent.Lookup("gemini")
	home := t.TempDir()
	var asked string
	adc := func(host string) (string, string, error) { asked = host; return GoogleJailADC, host, nil }
	c, err := Resolve(gemini, &Host{Home: home, Environ: []string{"GOOGLE_GENAI_USE_VERTEXAI=true"}}, adc)
	if err != nil || asked != filepath.Join(home, ".config/gcloud/application_default_credentials.json") ||
		!slices.Equal(c.Env, []string{"GOOGLE_APPLICATION_CREDENTIALS=" + GoogleJailADC}) || len(c.Files) != 1 {
		t.Errorf("%v asked %q creds %+v", err, asked, c)
	}
	_, err = Resolve(gemini, &Host{Home: home, Environ: []string{"GOOGLE_GENAI_USE_VERTEXAI=1", "GOOGLE_APPLICATION_CREDENTIALS=/srv/sa.json"}}, adc)
	if err != nil || asked != "/srv/sa.json" {
		t.Errorf("%v asked %q", err, asked)
	}
	if _, err := Resolve(gemini, &Host{Home: home, Environ: []string{"GOOGLE_GENAI_USE_VERTEXAI=1", "GOOGLE_APPLICATION_CREDENTIALS=sa.json"}}, adc); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("a relative path: %v", err)
	}
}
