// Package awsload resolves the user's AWS profile's credentials with the
// AWS SDK for Go v2's own loader (the environment's keys, then the profile
// AWS_PROFILE names: static keys, SSO, a credential_process, an assumed
// role). It runs in a process of its own, `egress-proxy aws-credentials`,
// which the shadow starts only when an agent's Bedrock switch is on: the
// SDK brings an HTTP stack that every other launch does without.
package awsload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/cco-dev/cco/sandbox/cloudcreds"
)

// Load resolves the credentials of the profile the process's environment
// names (AWS_PROFILE, or the default), within timeout.
func Load(timeout time.Duration) (*cloudcreds.Answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("the profile has no credentials")
	}
	cr, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, err
	}
	if cr.AccessKeyID == "" || cr.SecretAccessKey == "" {
		return nil, fmt.Errorf("the profile gave no access key")
	}
	a := &cloudcreds.Answer{AccessKeyID: cr.AccessKeyID, SecretAccessKey: cr.SecretAccessKey, SessionToken: cr.SessionToken,
		Region: cfg.Region, Source: cr.Source}
	if cr.CanExpire {
		a.Expires = cr.Expires
	}
	return a, nil
}

// Serve answers on w, as JSON, and returns the exit status: 0 with the
// credentials, 1 with the error.
func Serve(w io.Writer, timeout time.Duration) int {
	a, err := Load(timeout)
	if err != nil {
		a = &cloudcreds.Answer{Error: err.Error()}
	}
	json.NewEncoder(w).Encode(a)
	if err != nil {
		return 1
	}
	return 0
}
