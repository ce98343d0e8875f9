package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/sandbox"
)

// status shows the upstream proxy in effect, from egress_upstream and
// (for "env") the command's environment, never its credentials.
func TestStatusEgressUpstream(t *testing.T) {
	for _, tc := range []struct {
		cfg     string
		environ []string
		mode    string
		want    string
	}{
		{"", nil, "public", "direct (no proxy variable set)"},
		{"", []string{"https_proxy=http://ada:s3cret@proxy.corp:8080", "no_proxy=.corp"}, "public", "CONNECT via proxy.corp:8080 with Basic credentials (from https_proxy), 1 no_proxy entries direct"},
		{"egress = \"allowlist\"\negress_upstream = \"http://u:s3cret@10.0.0.1:3128\"\n", []string{"https_proxy=http://other:1"}, "allowlist", "CONNECT via 10.0.0.1:3128 with Basic credentials, http via 10.0.0.1:3128 with Basic credentials (from egress_upstream)"},
		{"egress_upstream = \"none\"\n", []string{"https_proxy=http://other:1"}, "public", "direct (egress_upstream = \"none\")"},
		{"", []string{"HTTPS_PROXY=socks5://p:1080"}, "public", "not usable: HTTPS_PROXY: \"socks5://p:1080\": the upstream proxy must be http://"},
		{"egress = \"off\"\n", []string{"https_proxy=http://p:1"}, "off", ""},
	} {
		dir := t.TempDir()
		if tc.cfg != "" {
			p := filepath.Join(dir, sandbox.ConfigPath)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(tc.cfg), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		root, err := provision.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		mode, up := egressMode(root, &provision.StatusReport{}, map[string]bool{}, tc.environ)
		if mode != tc.mode || !strings.HasPrefix(up, tc.want) || (tc.want == "" && up != "") {
			t.Errorf("%q %q: mode %q upstream %q, want %q %q", tc.cfg, tc.environ, mode, up, tc.mode, tc.want)
		}
		if strings.Contains(up, "s3cret") {
			t.Errorf("status shows the password: %s", up)
		}
	}
}
