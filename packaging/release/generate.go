package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// generatedDir is where the before hooks put package contents (build/ in
// the checkout for goreleaser; under the dist directory for mkpkg, so that
// two builds of one checkout never write the same files).
const generatedDir = "build"

// Generate runs the before hooks that are "go run" commands (the man
// pages, the completion scripts), in the checkout, with SOURCE_DATE_EPOCH
// set to the epoch and each argument under build/ moved under the dist
// directory. Other hooks (ansible-galaxy, which builds a release artifact
// and no package content) are goreleaser's alone.
func Generate(ctx context.Context, f *File, o *Options) error {
	if err := o.fill(f); err != nil {
		return err
	}
	for _, h := range f.Before.Hooks {
		args := strings.Fields(h)
		if len(args) < 3 || args[0] != "go" || args[1] != "run" {
			continue
		}
		for i, a := range args[2:] {
			if strings.HasPrefix(a, generatedDir+"/") {
				args[2+i] = filepath.Join(o.Dist, a)
			}
		}
		cmd := exec.CommandContext(ctx, "go", args[1:]...)
		cmd.Dir = o.Repo
		cmd.Env = append(append(os.Environ(), f.Env...), "SOURCE_DATE_EPOCH="+strconv.FormatInt(o.Epoch.Unix(), 10))
		o.logf("before hook: %s", strings.Join(args, " "))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("before hook %q: %v\n%s", h, err, out)
		}
	}
	return nil
}
