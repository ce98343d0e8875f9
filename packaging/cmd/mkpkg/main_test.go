package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	var pre []string
	for _, id := range []string{"cco-install", "shadow", "egress-proxy"} {
		p := filepath.Join(dir, id)
		os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
		pre = append(pre, "--prebuilt", id+"="+p)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	base := []string{"--config", "../../../goreleaser.yaml", "--repo", "../../.."}
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // on stdout (code 0) or stderr
	}{
		{"no version", base, 2, "--version is required"},
		{"bad prebuilt", append(append([]string{}, base...), "--version", "1.0.0", "--prebuilt", "shadow"), 2, "want ID=FILE"},
		{"stray argument", append(append([]string{}, base...), "extra"), 2, `"extra"`},
		{"repo without a key", append(append([]string{}, base...), "--version", "1.0.0", "--apt-repo", dir, "--signing-key", ""), 2, "give the key with --signing-key FILE"},
		{"missing config", []string{"--config", filepath.Join(dir, "nope.yaml"), "--version", "1.0.0"}, 1, "nope.yaml"},
		{"deb only", append(append(append([]string{}, base...), pre...), "--version", "1.0.0", "--arch", "amd64", "--format", "deb", "--dist", filepath.Join(dir, "dist")),
			0, "deb\tamd64\t" + filepath.Join(dir, "dist", "cco_1.0.0_amd64.deb")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			got := stderr.String()
			if code == 0 {
				got = stdout.String()
				if strings.Contains(got, ".rpm") {
					t.Errorf("--format deb built an rpm:\n%s", got)
				}
			}
			if !strings.Contains(got, tc.out) {
				t.Errorf("output lacks %q:\n%s", tc.out, got)
			}
		})
	}
}
