package hostenv

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/docscheck"
)

// view shows everything but hidden, and protects protected.
type view struct{ hidden, protected string }

func (v view) Visible(p string) bool {
	return !(p == v.hidden || strings.HasPrefix(p, v.hidden+"/"))
}

func (v view) Protected(p string) string {
	if p == v.protected || strings.HasPrefix(p, v.protected+"/") {
		return v.protected
	}
	return ""
}

func (v view) Holds(dir string) string {
	if v.protected == dir || strings.HasPrefix(v.protected, dir+"/") {
		return v.protected
	}
	return ""
}

func TestCA(t *testing.T) {
	d := t.TempDir()
	home := filepath.Join(d, "home")
	shown := filepath.Join(d, "shown")
	for _, p := range []string{home + "/certs", home + "/.ssh", shown, home + "/certdir"} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ca := home + "/certs/ca.pem"
	os.WriteFile(ca, []byte("ca"), 0o600)
	os.WriteFile(shown+"/ca.pem", []byte("ca"), 0o600)
	os.WriteFile(home+"/.ssh/id", []byte("key"), 0o600)
	// A link the jail shows, to a file in the hidden home.
	os.Symlink(ca, shown+"/link.pem")
	v := view{hidden: home, protected: home + "/.ssh"}

	env, files, err := CA([]string{"NODE_EXTRA_CA_CERTS=" + ca, "SSL_CERT_FILE=" + shown + "/ca.pem",
		"REQUESTS_CA_BUNDLE=" + shown + "/link.pem", "SSL_CERT_DIR=" + home + "/certdir:" + shown,
		"CURL_CA_BUNDLE=" + d + "/missing.pem", "PIP_CERT=relative.pem", "OTHER=" + ca}, v)
	if err != nil {
		t.Fatal(err)
	}
	if len(env) != 6 || slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "OTHER=") }) {
		t.Errorf("env %q: want the six CA variables, as they are", env)
	}
	want := []File{{Src: ca, Dst: ca}, {Src: ca, Dst: ca}, {Src: home + "/certdir", Dst: home + "/certdir"}}
	want = slices.Compact(want)
	if !slices.Equal(files, want) {
		t.Errorf("files %+v, want %+v (the hidden file once, the hidden directory; nothing for what the jail shows or what is missing)", files, want)
	}

	// A CA in a protected tree, as named or through a link, is refused,
	// naming the variable and the path.
	os.Symlink(home+"/.ssh/id", shown+"/sneaky.pem")
	for _, p := range []string{home + "/.ssh/id", shown + "/sneaky.pem"} {
		_, _, err := CA([]string{"GIT_SSL_CAINFO=" + p}, v)
		var r *Refusal
		if !errors.As(err, &r) || !strings.Contains(err.Error(), "GIT_SSL_CAINFO") || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "fix:") {
			t.Errorf("GIT_SSL_CAINFO=%s: %v, want a refusal naming both, with a fix", p, err)
		}
	}
	// A hidden directory that holds a protected tree (the home itself, as
	// named or through a link) is refused too: its bind would show it.
	os.Symlink(home, shown+"/homelink")
	for _, p := range []string{home, shown + "/homelink"} {
		_, _, err := CA([]string{"SSL_CERT_DIR=" + p}, v)
		var r *Refusal
		if !errors.As(err, &r) || !r.Holds || !strings.Contains(err.Error(), "SSL_CERT_DIR") || !strings.Contains(err.Error(), home+"/.ssh") || !strings.Contains(err.Error(), "fix:") {
			t.Errorf("SSL_CERT_DIR=%s: %v, want a refusal naming the variable and the tree it holds, with a fix", p, err)
		}
	}
}

func TestSettings(t *testing.T) {
	claude, _ := agent.Lookup("claude")
	got := Settings(claude, []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CONFIG_DIR=/x", "DISABLE_TELEMETRY=1", "RUST_LOG=debug", "NOEQUALS"})
	if !slices.Equal(got, []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1"}) {
		t.Errorf("claude's settings %q", got)
	}
}

// docs/reference/environment.md's CA table names every CA variable.
func TestDocsCAVars(t *testing.T) {
	tb := docscheck.TableOf(t, "docs/reference/environment.md", "The company's CA")
	vc := tb.Col(t, "variable")
	for _, v := range CAVars {
		if !slices.ContainsFunc(tb.Rows, func(r []docscheck.Cell) bool { return slices.Contains(r[vc].Code, v) }) {
			t.Errorf("docs/reference/environment.md, %s: add a row for %s", tb.Heading, v)
		}
	}
}
