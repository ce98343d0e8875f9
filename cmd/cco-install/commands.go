package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/cco-dev/cco/provision"
)

// printConfig shows every key's effective value and where it came from.
func printConfig(cfg *Config, o *options, stdout io.Writer) error {
	lines := cfg.Lines()
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"schema": provision.ReportSchema, "file": cfg.path, "keys": lines})
	}
	for _, l := range lines {
		b, _ := json.Marshal(l.Value)
		fmt.Fprintf(stdout, "%s = %s  # %s\n", l.Key, b, l.Source)
	}
	return nil
}

// status compares the installation with its receipt.
func status(ctx context.Context, root *provision.Root, cfg *Config, o *options, stdout io.Writer) (int, error) {
	rc, _, err := provision.LoadReceipt(root)
	if err != nil {
		return provision.ExitFailed, err
	}
	rep := provision.CheckReceipt(root, rc, o.verify)
	if len(rc.Paths) == 0 {
		rep.AddFinding(provision.Finding{ID: "receipt", Path: provision.ReceiptPath, Detail: "cco is not installed here (no receipt)", Fix: "sudo cco-install"})
	}
	if o.json {
		return rep.ExitCode(), rep.WriteJSON(stdout)
	}
	rep.WriteText(stdout)
	return rep.ExitCode(), nil
}
