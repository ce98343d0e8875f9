package awsload

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cco-dev/cco/sandbox/cloudcreds"
)

// The SDK's loader resolves static keys and a credential_process from
// the files the environment names, and answers an unknown profile with
// its error.
func TestServe(t *testing.T) {
	d := t.TempDir()
	proc := filepath.Join(d, "proc")
	os.WriteFile(proc, []byte(`#!/bin/sh
echo '{"Version":1,"AccessKeyId":"AKIDP","SecretAccessKey":"sp","SessionToken":"tp","Expiration":"2099-01-01T00:00:00Z"}'
`), 0o755)
	os.WriteFile(filepath.Join(d, "config"), []byte("[profile s]\nregion = eu-north-1\n[profile p]\ncredential_process = "+proc+"\n"), 0o600)
	os.WriteFile(filepath.Join(d, "credentials"), []byte("[s]\naws_access_key_id = AKIDS\naws_secret_access_key = ss\n"), 0o600)
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("HOME", d)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(d, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(d, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, c := range []struct {
		profile string
		code    int
		want    cloudcreds.Answer
	}{
		{"s", 0, cloudcreds.Answer{AccessKeyID: "AKIDS", SecretAccessKey: "ss", Region: "eu-north-1"}},
		{"p", 0, cloudcreds.Answer{AccessKeyID: "AKIDP", SecretAccessKey: "sp", SessionToken: "tp", Expires: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}},
	} {
		t.Setenv("AWS_PROFILE", c.profile)
		var b bytes.Buffer
		code := Serve(&b, 10*time.Second)
		var a cloudcreds.Answer
		if err := json.Unmarshal(b.Bytes(), &a); err != nil || code != c.code {
			t.Fatalf("profile %s: exit %d %q %v", c.profile, code, b.String(), err)
		}
		a.Source = ""
		if !a.Expires.Equal(c.want.Expires) || a.AccessKeyID != c.want.AccessKeyID || a.SecretAccessKey != c.want.SecretAccessKey ||
			a.SessionToken != c.want.SessionToken || a.Region != c.want.Region {
			t.Errorf("profile %s: %+v, want %+v", c.profile, a, c.want)
		}
	}
	t.Setenv("AWS_PROFILE", "nope")
	var b bytes.Buffer
	if code := Serve(&b, 10*time.Second); code != 1 || !bytes.Contains(b.Bytes(), []byte(`"error"`)) || !bytes.Contains(b.Bytes(), []byte("nope")) {
		t.Errorf("an unknown profile: exit %d %s", code, b.String())
	}
}
