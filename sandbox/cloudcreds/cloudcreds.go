// Package cloudcreds resolves, on the host, the cloud credentials an
// agent's own provider needs in its jail, while the agent's switch for that
// cloud is on (agent.Profile.Clouds): Amazon Bedrock's from the user's AWS
// profile, through the AWS SDK for Go v2's own loader (static keys, SSO, a
// credential_process), and Vertex AI's application default credentials
// file. The jail gets the resolved keys as variables and the one file read
// only; ~/.aws and ~/.config/gcloud stay hidden in every jail, and no other
// agent's jail gets any of it.
package cloudcreds

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cco-dev/cco/agent"
)

// ResolveTimeout bounds the resolution of the AWS profile's credentials (a
// credential_process, SSO's token exchange).
const ResolveTimeout = 30 * time.Second

// GoogleJailADC is where the jail shows the application default
// credentials file when the jail would not show it at its own path (under
// ~/.config/gcloud, which stays hidden): one file in the jail's private
// /run.
const GoogleJailADC = "/run/cco/gcloud/application_default_credentials.json"

// Creds is what one launch's clouds give the jail.
type Creds struct {
	// Env is set in the jail (KEY=VALUE), over any host value of the key.
	Env []string
	// Files are {host real path, jail path}: bound read-only.
	Files [][2]string
	// Notes are one-line messages for the user (when temporary
	// credentials expire).
	Notes []string
}

// Host is the host side of a resolution.
type Host struct {
	Home    string
	Environ []string
	// Now is the clock for the expiry note (time.Now when nil).
	Now func() time.Time
	// Helper is the program that runs AWSMode (the egress proxy's
	// binary).
	Helper string
}

func (h *Host) getenv(k string) string {
	v := ""
	for _, kv := range h.Environ {
		if s, ok := strings.CutPrefix(kv, k+"="); ok {
			v = s
		}
	}
	return v
}

// Resolve gives p's jail the credentials of each cloud whose switch is on
// in the host's environment; nothing for an agent with no switch on.
// adc decides how the Google credentials file is readable in the jail: it
// returns the jail path to name, and the file to bind ("" when none is
// needed).
func Resolve(p *agent.Profile, h *Host, adc func(host string) (jail, bindSrc string, err error)) (*Creds, error) {
	c := &Creds{}
	for _, cloud := range p.Cloud(h.Environ) {
		var err error
		switch cloud {
		case agent.CloudAWS:
			err = c.aws(p, h)
		case agent.CloudGoogle:
			err = c.google(p, h, adc)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// AWSMode is the egress-proxy argument that resolves the AWS profile's
// credentials (package awsload) and answers with an Answer on standard
// output. The SDK links an HTTP stack: it runs there, in a process the
// shadow starts only while a Bedrock switch is on, never in the shadow.
const AWSMode = "aws-credentials"

// Answer is the aws-credentials process's answer, as JSON.
type Answer struct {
	AccessKeyID     string    `json:"access_key_id,omitempty"`
	SecretAccessKey string    `json:"secret_access_key,omitempty"`
	SessionToken    string    `json:"session_token,omitempty"`
	Region          string    `json:"region,omitempty"`
	Source          string    `json:"source,omitempty"`
	Expires         time.Time `json:"expires,omitzero"`
	Error           string    `json:"error,omitempty"`
}

// aws resolves the AWS profile's credentials with the SDK's loader, in
// the helper process, with the user's environment: the environment's keys
// first, then the profile AWS_PROFILE names (or "default") in
// AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE (or ~/.aws/config and
// ~/.aws/credentials).
func (c *Creds) aws(p *agent.Profile, h *Host) error {
	if agent.On(h.getenv("CLAUDE_CODE_SKIP_BEDROCK_AUTH")) {
		// A gateway signs the requests: no credentials wanted.
		return nil
	}
	if h.getenv("AWS_BEARER_TOKEN_BEDROCK") != "" {
		// Bedrock's API key: the profile's own credential, passed as it is.
		return nil
	}
	name := h.getenv("AWS_PROFILE")
	if name == "" {
		name = "default"
	}
	fix := fmt.Sprintf("(fix: sign in on the host, e.g. aws sso login --profile %s, or set AWS_PROFILE to a profile with credentials, or unset %s)", name, switchOf(p, agent.CloudAWS))
	ctx, cancel := context.WithTimeout(context.Background(), ResolveTimeout+5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.Helper, AWSMode)
	cmd.Env = h.Environ
	cmd.Dir = h.Home
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	var a Answer
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		return fmt.Errorf("resolving the AWS profile %s for %s's Bedrock: %s %s: %v %s", name, p.Name, h.Helper, AWSMode, firstOf(runErr, err), fix)
	}
	if a.Error != "" {
		return fmt.Errorf("resolving the AWS profile %s's credentials for %s's Bedrock: %s %s", name, p.Name, a.Error, fix)
	}
	if a.AccessKeyID == "" || a.SecretAccessKey == "" {
		return fmt.Errorf("the AWS profile %s gave no access key for %s's Bedrock %s", name, p.Name, fix)
	}
	c.Env = append(c.Env, "AWS_ACCESS_KEY_ID="+a.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+a.SecretAccessKey)
	if a.SessionToken != "" {
		c.Env = append(c.Env, "AWS_SESSION_TOKEN="+a.SessionToken)
	}
	if a.Region != "" {
		c.Env = append(c.Env, "AWS_REGION="+a.Region, "AWS_DEFAULT_REGION="+a.Region)
	}
	if !a.Expires.IsZero() {
		now := time.Now
		if h.Now != nil {
			now = h.Now
		}
		left := a.Expires.Sub(now()).Round(time.Minute)
		c.Notes = append(c.Notes, fmt.Sprintf("%s's Bedrock credentials from the AWS profile %s are temporary: they expire at %s (in %s); the jail cannot renew them, so start %s again then (%s --continue keeps the conversation)",
			p.Name, name, a.Expires.UTC().Format("2006-01-02 15:04 UTC"), left, p.Name, p.Name))
	}
	return nil
}

func firstOf(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// google makes the application default credentials file readable in the
// jail and names it there: GOOGLE_APPLICATION_CREDENTIALS, or gcloud's
// default place under ~/.config/gcloud.
func (c *Creds) google(p *agent.Profile, h *Host, adc func(string) (string, string, error)) error {
	f := h.getenv("GOOGLE_APPLICATION_CREDENTIALS")
	if f == "" {
		cfgDir := h.getenv("CLOUDSDK_CONFIG")
		if cfgDir == "" {
			cfgDir = filepath.Join(h.Home, ".config", "gcloud")
		}
		f = filepath.Join(cfgDir, "application_default_credentials.json")
	}
	if !filepath.IsAbs(f) {
		return fmt.Errorf("GOOGLE_APPLICATION_CREDENTIALS %q is not an absolute path (fix: set it to the file's absolute path)", f)
	}
	jail, src, err := adc(f)
	if err != nil {
		return fmt.Errorf("%w (fix: gcloud auth application-default login on the host, or set GOOGLE_APPLICATION_CREDENTIALS to a service account's key file, or unset %s)", err, switchOf(p, agent.CloudGoogle))
	}
	if src != "" {
		c.Files = append(c.Files, [2]string{src, jail})
	}
	c.Env = append(c.Env, "GOOGLE_APPLICATION_CREDENTIALS="+jail)
	return nil
}

// switchOf names p's switches for the cloud, for a fix.
func switchOf(p *agent.Profile, cloud string) string {
	var out []string
	for k, c := range p.Clouds {
		if c == cloud {
			out = append(out, k)
		}
	}
	return strings.Join(out, " and ")
}
