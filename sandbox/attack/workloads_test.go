package attack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/internal/testenv"
)

// goCache is a build cache warmed once per test binary with the standard
// library a small program needs: a cold build here takes longer than a
// session may.
var goCache struct {
	once sync.Once
	dir  string
	err  error
}

const workloadMain = "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(%q + \"\\n\") }\n"

func warmGoCache(t *testing.T) string {
	t.Helper()
	goCache.once.Do(func() {
		dir, err := os.MkdirTemp("/var/lib", "cco-attack-gocache-")
		if err != nil {
			goCache.err = err
			return
		}
		fixture.dirs = append(fixture.dirs, dir)
		goCache.dir = filepath.Join(dir, "cache")
		mod := filepath.Join(dir, "mod")
		os.Mkdir(mod, 0o755)
		os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/workload\n\ngo 1.22\n"), 0o644)
		os.WriteFile(filepath.Join(mod, "main.go"), []byte(fmt.Sprintf(workloadMain, "warm")), 0o644)
		c := exec.Command(testenv.GoTool(), "build", "-o", filepath.Join(dir, "out"), ".")
		c.Dir = mod
		c.Env = append(os.Environ(), "GOCACHE="+goCache.dir, "GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=", "CGO_ENABLED=0")
		if out, err := c.CombinedOutput(); err != nil {
			goCache.err = fmt.Errorf("warming a build cache: %v\n%s", err, out)
		}
	})
	if goCache.err != nil {
		t.Fatal(goCache.err)
	}
	return goCache.dir
}

// TestWorkloads: the programs an agent runs still work under the jail's
// seccomp program (Docker's profile and cco's rules): git, a go build
// that compiles and links, node with its thread pool and a child process,
// python3 with threads and a subprocess, and strace following a child.
func TestWorkloads(t *testing.T) {
	goTool := testenv.GoTool()
	runAttacks(t, []attack{{
		name:   "git, go build, node, python3 and strace in the jail",
		only:   func(a string, _ jailtest.RunAs) bool { return a == agents[0] },
		serial: true,
		prep: func(t *testing.T, w *world) {
			mod := filepath.Join(w.ws, "workload")
			os.Mkdir(mod, 0o755)
			os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/workload\n\ngo 1.22\n"), 0o644)
			if out, err := exec.Command("cp", "-a", warmGoCache(t), filepath.Join(mod, ".gocache")).CombinedOutput(); err != nil {
				t.Fatalf("copying the build cache: %v\n%s", err, out)
			}
			w.Own(t)
		},
		probe: func(w *world, _ string) probe {
			goEnv := "GOCACHE=$PWD/.gocache GOPATH=/tmp/gopath GOTOOLCHAIN=local GOPROXY=off GOFLAGS= CGO_ENABLED=0"
			return probe{Steps: steps(
				"git", "git init -q gitwork && cd gitwork && echo x > f && git add f && git -c user.name=j -c user.email=j@example.org commit -qm one && git log --oneline | grep -c one",
				"go build", fmt.Sprintf("cd workload && printf '%%s' %s > main.go && env %s %s build -o out . && ./out",
					shq(fmt.Sprintf(workloadMain, "built in the jail")), goEnv, goTool),
				"node", `/usr/bin/node -e 'const fs=require("fs"), cp=require("child_process");
fs.readFile("/etc/hostname", (e) => { if (e) throw e;
  console.log("node", cp.execFileSync("/bin/echo", ["child"]).toString().trim()) })'`,
				"python3", `/usr/bin/python3 -c 'import subprocess, threading
t = threading.Thread(target=lambda: None); t.start(); t.join()
print("python3", subprocess.run(["/bin/echo", "child"], capture_output=True, text=True).stdout.strip())'`,
				"strace", "strace -f -qq -e trace=execve,openat -o /tmp/trace /bin/sh -c 'cat /etc/hostname >/dev/null' && grep -c execve /tmp/trace",
			)}
		},
		verdict: func(w *world) verdict { return verdict{noGit: true} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			succeeded(t, sess, "git", "go build", "node", "python3", "strace")
			for step, want := range map[string]string{"git": "1", "go build": "built in the jail", "node": "node child", "python3": "python3 child", "strace": "2"} {
				if got := strings.TrimSpace(strings.TrimPrefix(sess.Report["sh:"+step], "exit 0:")); got != want {
					t.Errorf("in the jail, %s printed %q, want %q", step, got, want)
				}
			}
		},
	}})
}
