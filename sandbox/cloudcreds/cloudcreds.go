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
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

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

// aws resolves the AWS profile's credentials with the SDK's loader: the
// environment's keys first, then the profile AWS_PROFILE names (or
// "default") in AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE (or
// ~/.aws/config and ~/.aws/credentials).
func (c *Creds) aws(p *agent.Profile, h *Host) error {
	if h.getenv("CLAUDE_CODE_SKIP_BEDROCK_AUTH") != "" && agent.On(h.getenv("CLAUDE_CODE_SKIP_BEDROCK_AUTH")) {
		// A gateway signs the requests: no credentials wanted.
		return nil
	}
	if h.getenv("AWS_BEARER_TOKEN_BEDROCK") != "" {
		// Bedrock's API key: the profile's own credential, passed as it is.
		return nil
	}
	profile := h.getenv("AWS_PROFILE")
	cfgFile := h.getenv("AWS_CONFIG_FILE")
	if cfgFile == "" {
		cfgFile = filepath.Join(h.Home, ".aws", "config")
	}
	credFile := h.getenv("AWS_SHARED_CREDENTIALS_FILE")
	if credFile == "" {
		credFile = filepath.Join(h.Home, ".aws", "credentials")
	}
	opts := []func(*config.LoadOptions) error{
		config.WithSharedConfigFiles([]string{cfgFile}),
		config.WithSharedCredentialsFiles([]string{credFile}),
	}
	if profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(profile))
	}
	ak, sk, st := h.getenv("AWS_ACCESS_KEY_ID"), h.getenv("AWS_SECRET_ACCESS_KEY"), h.getenv("AWS_SESSION_TOKEN")
	if ak != "" && sk != "" {
		opts = append(opts, config.WithCredentialsProvider(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk, SessionToken: st, Source: "environment"}, nil
		})))
	}
	if r := h.getenv("AWS_REGION"); r != "" {
		opts = append(opts, config.WithRegion(r))
	} else if r := h.getenv("AWS_DEFAULT_REGION"); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	ctx, cancel := context.WithTimeout(context.Background(), ResolveTimeout)
	defer cancel()
	name := profile
	if name == "" {
		name = "default"
	}
	fix := fmt.Sprintf("(fix: sign in on the host, e.g. aws sso login --profile %s, or set AWS_PROFILE to a profile with credentials, or unset %s)", name, switchOf(p, agent.CloudAWS))
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return fmt.Errorf("loading the AWS profile %s for %s's Bedrock: %w %s", name, p.Name, err, fix)
	}
	if cfg.Credentials == nil {
		return fmt.Errorf("the AWS profile %s has no credentials for %s's Bedrock %s", name, p.Name, fix)
	}
	cr, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("resolving the AWS profile %s's credentials for %s's Bedrock: %w %s", name, p.Name, err, fix)
	}
	if cr.AccessKeyID == "" || cr.SecretAccessKey == "" {
		return fmt.Errorf("the AWS profile %s gave no access key for %s's Bedrock %s", name, p.Name, fix)
	}
	c.Env = append(c.Env, "AWS_ACCESS_KEY_ID="+cr.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+cr.SecretAccessKey)
	if cr.SessionToken != "" {
		c.Env = append(c.Env, "AWS_SESSION_TOKEN="+cr.SessionToken)
	}
	if cfg.Region != "" {
		c.Env = append(c.Env, "AWS_REGION="+cfg.Region, "AWS_DEFAULT_REGION="+cfg.Region)
	}
	if cr.CanExpire {
		now := time.Now
		if h.Now != nil {
			now = h.Now
		}
		left := cr.Expires.Sub(now()).Round(time.Minute)
		c.Notes = append(c.Notes, fmt.Sprintf("%s's Bedrock credentials from the AWS profile %s are temporary: they expire at %s (in %s); the jail cannot renew them, so start %s again then (%s --continue keeps the conversation)",
			p.Name, name, cr.Expires.UTC().Format("15:04 UTC"), left, p.Name, p.Name))
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
