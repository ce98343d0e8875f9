package provision

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
)

// unprivileged are the tests that must also pass for a user who is not
// root and stages an image under --root: there every owner is the user's
// own, and a chown to root would fail.
const unprivileged = "^(TestFileFresh|TestFileAlreadyDone|TestFileHandEdited|TestExecuteFailureMidPlanThenConverges|TestReceiptSave|TestLockWaitsForRelease|TestLockNoLostUpdate|TestMkdirAll|TestWriteFileAtomic)$"

// TestUnprivileged runs those tests again as nobody (CI runs as root, so
// without this no test would ever see a run that cannot chown).
func TestUnprivileged(t *testing.T) {
	testenv.RequireRoot(t)
	if os.Getenv(helperEnv) != "" {
		t.Skip("already a helper")
	}
	// The test binary lives in a directory only root may enter: copy it.
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "provision.test")
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.Close()

	cmd := exec.Command(bin, "-test.run="+unprivileged, "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+os.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, b)
	}
	for _, name := range strings.Split(strings.Trim(unprivileged, "^()$"), "|") {
		if !strings.Contains(string(b), "--- PASS: "+name+" ") {
			t.Errorf("as nobody, %s did not pass:\n%s", name, b)
		}
	}
}
