package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// versionDoc is `version --json`.
type versionDoc struct {
	Schema  int    `json:"schema"`
	Version string `json:"version"`
}

// writeCompletions writes cobra's completion scripts under the names the
// package installs them by: cco-install (bash), _cco-install (zsh) and
// cco-install.fish.
func writeCompletions(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, gen := range map[string]func(io.Writer) error{
		"cco-install":      func(w io.Writer) error { return root.GenBashCompletionV2(w, true) },
		"_cco-install":     root.GenZshCompletion,
		"cco-install.fish": func(w io.Writer) error { return root.GenFishCompletion(w, true) },
	} {
		var b strings.Builder
		if err := gen(&b); err != nil {
			return fmt.Errorf("the %s completion: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
