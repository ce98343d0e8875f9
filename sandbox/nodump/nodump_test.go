package nodump

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSeal runs in a child of its own (the seal is for the process's
// life): once sealed, the process is not dumpable, and its /proc/PID/mem
// and environ refuse another process of the same user that has no
// CAP_SYS_PTRACE, as a jail's processes have none. The check of another
// process is the kernel's; here the seal's own report is what is asserted.
func TestSeal(t *testing.T) {
	if os.Getenv("CCO_NODUMP_CHILD") == "1" {
		if d, err := Dumpable(); err != nil || !d {
			os.Stdout.WriteString("not dumpable before the seal\n")
			os.Exit(1)
		}
		if err := Seal(); err != nil {
			os.Stdout.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		if d, err := Dumpable(); err != nil || d {
			os.Stdout.WriteString("dumpable after the seal\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("sealed\n")
		os.Exit(0)
	}
	c := exec.Command(os.Args[0], "-test.run=^TestSeal$")
	c.Env = append(os.Environ(), "CCO_NODUMP_CHILD=1")
	out, err := c.Output()
	if err != nil || !strings.Contains(string(out), "sealed") {
		t.Fatalf("the child: %v, %q", err, out)
	}
}
