package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
)

// hostFile writes a file of the world's user.
func (w *world) hostFile(t *testing.T, rel, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(w.base, rel)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), mode))
	for d := p; d != w.base; d = filepath.Dir(d) {
		os.Lchown(d, w.u.uid, w.u.gid)
	}
	return p
}

// lines are the script's KEY=VALUE output lines.
func lines(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// The company's CA passes into every agent's jail and is readable there,
// from under the home too; one in a protected tree refuses the launch. The
// agent's own settings variables pass into its jail only, never the
// refused ones a prefix would match. Verdicts from what the jail printed
// and the launch's exit, on the host.
func TestJailCompanyCAAndSettings(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	for _, u := range []runAs{asRoot, asNobody} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			ca := w.hostFile(t, "home/certs/company-ca.pem", "company-ca\n", 0o644)
			w.hostFile(t, "home/certdir/ab12cd34.0", "dir-ca\n", 0o644)
			env := []string{"NODE_EXTRA_CA_CERTS=" + ca, "SSL_CERT_DIR=" + filepath.Join(w.home, "certdir") + ":/etc/ssl/certs",
				"PIP_CERT=" + ca, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "API_TIMEOUT_MS=600000",
				"CLAUDE_CONFIG_DIR=/srv/elsewhere", "CLAUDE_CODE_MESSAGING_TOKEN=host-token", "RUST_LOG=debug", "IS_SANDBOX=1"}
			script := `echo "ca=$(cat "$NODE_EXTRA_CA_CERTS")"
echo "dirca=$(cat ` + w.home + `/certdir/ab12cd34.0)"
echo "pip=$PIP_CERT"
echo "nonessential=${CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC-unset}"
echo "telemetry=${DISABLE_TELEMETRY-unset}"
echo "timeout=${API_TIMEOUT_MS-unset}"
echo "configdir=${CLAUDE_CONFIG_DIR-unset}"
echo "msg=${CLAUDE_CODE_MESSAGING_TOKEN-unset}"
echo "rust=${RUST_LOG-unset}"
echo "sandbox=${IS_SANDBOX-unset}"
echo "home=$(ls -A ` + w.home + ` | tr '\n' ' ')"
if echo planted >> "$NODE_EXTRA_CA_CERTS" 2>/dev/null; then echo "wrote_ca=yes"; else echo "wrote_ca=no"; fi
if rm -f "$NODE_EXTRA_CA_CERTS" 2>/dev/null && [ ! -e "$NODE_EXTRA_CA_CERTS" ]; then echo "removed_ca=yes"; else echo "removed_ca=no"; fi
if echo planted >> /etc/profile 2>/dev/null; then echo "wrote_profile=yes"; else echo "wrote_profile=no"; fi
ls -A ` + w.home + `/.ssh >/dev/null 2>&1 && echo "ssh=shown" || echo "ssh=hidden"
`
			r := w.sh(t, root, "claude", w.ws, script, env...)
			got := lines(r.stdout)
			for k, want := range map[string]string{"ca": "company-ca", "dirca": "dir-ca", "pip": ca, "nonessential": "1",
				"telemetry": "1", "timeout": "600000", "configdir": filepath.Join(w.home, ".claude"), "msg": "unset",
				"rust": "unset", "sandbox": "unset"} {
				if got[k] != want {
					t.Errorf("claude's jail: %s = %q, want %q (exit %d, stderr %s)", k, got[k], want, r.code, r.stderr)
				}
			}
			// The bound CA and the jail's /etc/profile are read-only: the
			// host's files are as they were.
			for _, k := range []string{"wrote_ca", "removed_ca", "wrote_profile"} {
				if got[k] != "no" {
					t.Errorf("claude's jail: %s = %q", k, got[k])
				}
			}
			if b, err := os.ReadFile(ca); err != nil || string(b) != "company-ca\n" {
				t.Errorf("the host's CA file after the session: %q %v", b, err)
			}
			if b, err := os.ReadFile("/etc/profile"); err != nil || strings.Contains(string(b), "planted") || strings.Contains(string(b), "cco:") {
				t.Errorf("the host's /etc/profile after the session holds the jail's lines or a plant: %v", err)
			}
			if got["ssh"] != "hidden" {
				t.Errorf("claude's jail shows ~/.ssh beside the bound CA")
			}
			// Only the CA files are shown of the home: not .ssh, .aws.
			if strings.Contains(got["home"], ".ssh") || strings.Contains(got["home"], ".aws") {
				t.Errorf("claude's jail home shows %s", got["home"])
			}
			r = w.sh(t, root, "codex", w.ws, script, env...)
			got = lines(r.stdout)
			for k, want := range map[string]string{"ca": "company-ca", "nonessential": "unset", "telemetry": "unset",
				"timeout": "unset", "rust": "debug", "configdir": "unset"} {
				if got[k] != want {
					t.Errorf("codex's jail: %s = %q, want %q (exit %d, stderr %s)", k, got[k], want, r.code, r.stderr)
				}
			}
			// A CA in a protected tree refuses the launch, naming both.
			for _, bad := range []string{filepath.Join(w.home, ".ssh/id_ed25519"), filepath.Join(w.home, ".codex/auth.json")} {
				r = w.sh(t, root, "claude", w.ws, "echo ran", "SSL_CERT_FILE="+bad)
				if r.code != 126 || !strings.Contains(r.stderr, "SSL_CERT_FILE") || !strings.Contains(r.stderr, bad) || strings.Contains(r.stdout, "ran") {
					t.Errorf("SSL_CERT_FILE=%s: exit %d, stdout %q, stderr %q; want 126 naming the variable and the path", bad, r.code, r.stdout, r.stderr)
				}
			}
			// So does a CA directory that holds a protected tree: its bind
			// would show ~/.config/gcloud, ~/.ssh.
			w.hostFile(t, "home/.config/gcloud/application_default_credentials.json", "gcloud-secret\n", 0o600)
			for _, bad := range []string{filepath.Join(w.home, ".config"), w.home} {
				r = w.sh(t, root, "claude", w.ws, "cat "+w.home+"/.config/gcloud/application_default_credentials.json; echo ran", "SSL_CERT_DIR="+bad)
				if r.code != 126 || !strings.Contains(r.stderr, "SSL_CERT_DIR") || !strings.Contains(r.stderr, "holds the protected tree") || strings.Contains(r.stdout, "ran") {
					t.Errorf("SSL_CERT_DIR=%s: exit %d, stdout %q, stderr %q; want 126 naming the variable and the tree it holds", bad, r.code, r.stdout, r.stderr)
				}
			}
		})
	}
}

// A login shell in the jail keeps the jail's PATH (Codex runs its commands
// in one), for root and a user, in bash, sh and dash; and a commit made
// with git's config files at /dev/null (Gemini CLI's shell) carries the
// user's identity.
func TestJailLoginShellAndGitIdentity(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	if _, err := os.Stat("/usr/local/go/bin/go"); err != nil {
		t.Skip("no /usr/local/go/bin/go on this machine")
	}
	for _, u := range []runAs{asRoot, asNobody} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			script := `echo "path=$PATH"
echo "bashl=$(bash -lc 'echo $PATH')"
echo "bashgo=$(bash -lc 'command -v go')"
echo "shl=$(sh -lc 'echo $PATH')"
echo "dashl=$(dash -l -c 'echo $PATH')"
echo "dashgo=$(dash -l -c 'command -v go')"
`
			for _, name := range []string{"codex", "claude"} {
				c := w.cmd(root, name, w.ws, "probe", params(map[string]any{"mode": "sh", "script": script}))
				c.Env = withPath(c.Env, "/usr/local/go/bin:/usr/bin:/bin")
				r := runCmd(t, c)
				got := lines(r.stdout)
				if !strings.HasPrefix(got["path"], "/usr/local/go/bin:") {
					t.Fatalf("%s: the jail's PATH %q lacks the host's /usr/local/go/bin (exit %d, stderr %s)", name, got["path"], r.code, r.stderr)
				}
				for _, k := range []string{"bashl", "shl", "dashl"} {
					if !strings.HasPrefix(got[k], got["path"]) {
						t.Errorf("%s as %s: a login shell's PATH (%s) is %q, want the jail's %q first", name, u.name, k, got[k], got["path"])
					}
				}
				for _, k := range []string{"bashgo", "dashgo"} {
					if got[k] != "/usr/local/go/bin/go" {
						t.Errorf("%s as %s: %s = %q, want /usr/local/go/bin/go", name, u.name, k, got[k])
					}
				}
			}
			commit := `cd ` + w.ws + ` && git init -q idt && cd idt &&
env GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_SYSTEM=/dev/null GIT_CONFIG_NOSYSTEM=1 git -c commit.gpgsign=false commit -q --allow-empty -m x &&
echo "ident=$(git log -1 --format='%an <%ae>/%cn <%ce>')"`
			r := w.sh(t, root, "gemini", w.ws, commit)
			if got := lines(r.stdout)["ident"]; got != "Nobody Tester <nobody@example.org>/Nobody Tester <nobody@example.org>" {
				t.Errorf("gemini as %s: the commit's identity is %q (exit %d, stderr %s)", u.name, got, r.code, r.stderr)
			}
			// On the host: the commit is there, with the identity.
			out, err := exec.Command("git", "-c", "safe.directory=*", "-C", w.ws+"/idt", "log", "-1", "--format=%ae").Output()
			if err != nil || strings.TrimSpace(string(out)) != "nobody@example.org" {
				t.Errorf("the host's git log: %q %v", out, err)
			}
		})
	}
}

// Bedrock: with CLAUDE_CODE_USE_BEDROCK=1, claude's jail gets the keys of
// the profile AWS_PROFILE names, resolved on the host (static keys, and a
// credential_process script), and codex's jail, launched with the same
// environment, none; ~/.aws stays hidden in both. Vertex: the application
// default credentials file is readable in claude's jail, named by
// GOOGLE_APPLICATION_CREDENTIALS, and ~/.config/gcloud stays hidden.
func TestJailCloudCredentials(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	for _, u := range []runAs{asRoot, asNobody} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			proc := w.hostFile(t, "bin/aws-creds", `#!/bin/sh
echo '{"Version":1,"AccessKeyId":"AKIDPROCESS","SecretAccessKey":"proc-secret","SessionToken":"proc-token","Expiration":"2099-01-01T00:00:00Z"}'
`, 0o755)
			w.hostFile(t, "home/.aws/config", "[profile static]\nregion = eu-west-1\n[profile proc]\nregion = us-east-2\ncredential_process = "+proc+"\n", 0o600)
			w.hostFile(t, "home/.aws/credentials", "[static]\naws_access_key_id = AKIDSTATIC\naws_secret_access_key = static-secret\n", 0o600)
			w.hostFile(t, "home/.config/gcloud/application_default_credentials.json", `{"type":"authorized_user","refresh_token":"adc-token"}`, 0o600)
			script := `echo "id=${AWS_ACCESS_KEY_ID-unset}"
echo "secret=${AWS_SECRET_ACCESS_KEY-unset}"
echo "token=${AWS_SESSION_TOKEN-unset}"
echo "region=${AWS_REGION-unset}/${AWS_DEFAULT_REGION-unset}"
echo "aws=$(ls -A ` + w.home + `/.aws 2>&1 | tr '\n' ' ')"
echo "gac=${GOOGLE_APPLICATION_CREDENTIALS-unset}"
echo "adc=$(cat "${GOOGLE_APPLICATION_CREDENTIALS:-/nonexistent}" 2>/dev/null)"
echo "gcloud=$(ls -A ` + w.home + `/.config/gcloud 2>&1 | tr '\n' ' ')"
if [ -n "$GOOGLE_APPLICATION_CREDENTIALS" ] && echo planted >> "$GOOGLE_APPLICATION_CREDENTIALS" 2>/dev/null; then echo "wrote_adc=yes"; else echo "wrote_adc=no"; fi
`
			for _, c := range []struct {
				profile, id, secret, token, region string
			}{
				{"static", "AKIDSTATIC", "static-secret", "unset", "eu-west-1/eu-west-1"},
				{"proc", "AKIDPROCESS", "proc-secret", "proc-token", "us-east-2/us-east-2"},
			} {
				env := []string{"CLAUDE_CODE_USE_BEDROCK=1", "AWS_PROFILE=" + c.profile}
				r := w.sh(t, root, "claude", w.ws, script, env...)
				got := lines(r.stdout)
				for k, want := range map[string]string{"id": c.id, "secret": c.secret, "token": c.token, "region": c.region, "gac": "unset"} {
					if got[k] != want {
						t.Errorf("claude, profile %s: %s = %q, want %q (exit %d, stderr %s)", c.profile, k, got[k], want, r.code, r.stderr)
					}
				}
				if strings.Contains(got["aws"], "config") || strings.Contains(got["aws"], "credentials") {
					t.Errorf("claude's jail shows ~/.aws: %s", got["aws"])
				}
				r = w.sh(t, root, "codex", w.ws, script, env...)
				got = lines(r.stdout)
				for _, k := range []string{"id", "secret", "token"} {
					if got[k] != "unset" {
						t.Errorf("codex's jail, profile %s: %s = %q, want none (exit %d, stderr %s)", c.profile, k, got[k], r.code, r.stderr)
					}
				}
			}
			// A profile that gives no credentials refuses the launch with the fix.
			r := w.sh(t, root, "claude", w.ws, "echo ran", "CLAUDE_CODE_USE_BEDROCK=1", "AWS_PROFILE=missing")
			if r.code != 126 || !strings.Contains(r.stderr, "missing") || !strings.Contains(r.stderr, "fix:") || strings.Contains(r.stdout, "ran") {
				t.Errorf("a missing AWS profile: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}

			r = w.sh(t, root, "claude", w.ws, script, "CLAUDE_CODE_USE_VERTEX=1")
			got := lines(r.stdout)
			if got["gac"] != "/run/cco/gcloud/application_default_credentials.json" || !strings.Contains(got["adc"], "adc-token") ||
				strings.Contains(got["gcloud"], "application_default") || got["id"] != "unset" || got["wrote_adc"] != "no" {
				t.Errorf("claude with Vertex: %q (exit %d, stderr %s)", got, r.code, r.stderr)
			}
			if b, _ := os.ReadFile(filepath.Join(w.home, ".config/gcloud/application_default_credentials.json")); strings.Contains(string(b), "planted") {
				t.Errorf("the host's credentials file was written from the jail")
			}
			r = w.sh(t, root, "codex", w.ws, script, "CLAUDE_CODE_USE_VERTEX=1")
			if got := lines(r.stdout); got["gac"] != "unset" || got["adc"] != "" {
				t.Errorf("codex with claude's Vertex switch: %q", got)
			}
			// Gemini's own switch: its jail gets the file; claude's, with
			// Gemini's switch alone, does not.
			r = w.sh(t, root, "gemini", w.ws, script, "GOOGLE_GENAI_USE_VERTEXAI=true")
			if got := lines(r.stdout); got["gac"] != "/run/cco/gcloud/application_default_credentials.json" || !strings.Contains(got["adc"], "adc-token") {
				t.Errorf("gemini with Vertex: %q (exit %d, stderr %s)", got, r.code, r.stderr)
			}
			r = w.sh(t, root, "claude", w.ws, script, "GOOGLE_GENAI_USE_VERTEXAI=true")
			if got := lines(r.stdout); got["gac"] != "unset" || got["adc"] != "" {
				t.Errorf("claude with Gemini's Vertex switch: %q", got)
			}
		})
	}
}

// IS_SANDBOX=1 is in claude's jail where the shadow gives it
// --dangerously-skip-permissions and the session is root, and nowhere
// else: not for a user, not without the key, not in another agent's jail,
// and a host IS_SANDBOX never passes.
func TestJailIsSandboxForRootsSkipPermissions(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	cfg := filepath.Join(root, "etc/cco/sandbox.toml")
	script := `echo "sandbox=${IS_SANDBOX-unset}"`
	for _, c := range []struct {
		u    runAs
		name string
		skip bool
		want string
	}{
		{asRoot, "claude", true, "1"},
		{asNobody, "claude", true, "unset"},
		{asRoot, "claude", false, "unset"},
		{asRoot, "codex", true, "unset"},
	} {
		if c.skip {
			must(t, os.WriteFile(cfg, []byte("claude_skip_permissions = true\n"), 0o644))
		} else {
			os.Remove(cfg)
		}
		w := newWorld(t, c.u)
		r := w.sh(t, root, c.name, w.ws, script, "IS_SANDBOX=host")
		if got := lines(r.stdout)["sandbox"]; got != c.want {
			t.Errorf("%s as %s, claude_skip_permissions %v: IS_SANDBOX %q, want %q (exit %d, stderr %s)", c.name, c.u.name, c.skip, got, c.want, r.code, r.stderr)
		}
	}
	os.Remove(cfg)
}
