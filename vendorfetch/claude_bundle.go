package vendorfetch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
)

// bundleClaude adds Claude Code's release to a bundle in the store's own
// layout (claude/<version>/...): the manifest, its signature and the
// platform's binary.
func bundleClaude(ctx context.Context, src source, cfg Config, platform string, dir *os.File, idx *bundleIndex, small map[string][]byte, large map[string]string, order *[]string) error {
	v, err := resolveClaude(ctx, src, cfg)
	if err != nil {
		return err
	}
	sg, err := loadSigner(cfg.Claude.SigningKey, cfg.Claude.SigningFingerprint)
	if err != nil {
		return err
	}
	sub, err := subdir(dir, AgentClaude)
	if err != nil {
		return err
	}
	defer sub.Close()
	rel, err := fetchClaude(ctx, src, cfg, sg, v, platform, sub, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", v, err)
	}
	base := "claude/" + v
	small[base+"/manifest.json"] = rel.manifest
	files := []string{base + "/manifest.json"}
	sig := rel.sig
	if sig == nil { // carry the signature for installs that do check it
		sig, err = src.small(ctx, strings.TrimRight(cfg.Claude.BaseURL, "/")+"/"+v+"/manifest.json.sig")
		var nf *NotFoundError
		if err != nil && !errors.As(err, &nf) {
			return err
		}
	}
	if sig != nil {
		small[base+"/manifest.json.sig"] = sig
		files = append(files, base+"/manifest.json.sig")
	}
	bin := base + "/" + platform + "/claude"
	large[bin] = "claude/claude"
	files = append(files, bin)
	*order = append(*order, bin)
	idx.Agents[AgentClaude] = bundleEntry{Version: v, Platform: platform, Files: files}
	return nil
}
