package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// Another user's home removed between the plan and the jail is dropped
// from the masks, as a vanished socket is, and the launch's retry builds
// the jail without it; a home still there keeps its mask.
func TestVanishedOtherHomeDropped(t *testing.T) {
	dir := t.TempDir()
	kept, gone := filepath.Join(dir, "kept"), filepath.Join(dir, "gone")
	os.Mkdir(kept, 0o755)
	s := &Spec{Masks: []Mask{{Path: gone, Kind: MaskDir, OtherHome: true}, {Path: kept, Kind: MaskDir, OtherHome: true}, {Path: gone + "-plain", Kind: MaskDir}}}
	if !s.DropVanishedSockets() {
		t.Fatal("a vanished home was not dropped")
	}
	if len(s.Masks) != 2 || s.Masks[0].Path != kept || s.Masks[1].Path != gone+"-plain" {
		t.Fatalf("masks after the drop: %+v", s.Masks)
	}
	if s.DropVanishedSockets() {
		t.Error("a second drop found something")
	}
}
