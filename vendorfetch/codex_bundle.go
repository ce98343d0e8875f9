package vendorfetch

import (
	"context"
	"fmt"
	"os"
)

// bundleCodex adds Codex's release to a bundle in the primary store's
// layout (codex/releases/<version>/...): the checksum file and the
// target's package.
func bundleCodex(ctx context.Context, src source, cfg Config, platform string, dir *os.File, idx *bundleIndex, small map[string][]byte, large map[string]string, order *[]string) error {
	v, digests, err := resolveCodex(ctx, src, cfg)
	if err != nil {
		return err
	}
	target := codexTarget(platform)
	sub, err := subdir(dir, AgentCodex)
	if err != nil {
		return err
	}
	defer sub.Close()
	rel, err := fetchCodex(ctx, src, cfg, v, target, digests, sub)
	if err != nil {
		return fmt.Errorf("%s: %w", v, err)
	}
	base := "codex/releases/" + v
	small[base+"/"+SumsAsset] = rel.sums
	large[base+"/"+rel.asset] = "codex/package"
	*order = append(*order, base+"/"+rel.asset)
	idx.Agents[AgentCodex] = bundleEntry{Version: v, Platform: target, Files: []string{base + "/" + SumsAsset, base + "/" + rel.asset}}
	return nil
}
