package toolchains

import (
	"slices"
	"strings"
	"testing"
)

var protected = []string{".ssh", ".aws", ".gnupg", ".local/state/cco", ".cache/cco", ".claude", ".codex"}

func TestParse(t *testing.T) {
	got, err := Parse([]string{"~/.rustup", "~/tools/bin/", "~/.local/share/uv/python"}, protected)
	if err != nil || !slices.Equal(got, []string{".rustup", "tools/bin", ".local/share/uv/python"}) {
		t.Fatalf("Parse = %q, %v", got, err)
	}
	for entry, want := range map[string]string{
		"/opt/rust":         "does not start with ~/",
		"~/":                "not a path below the home",
		"~/..":              "not a path below the home",
		"~/../other/bin":    "not a path below the home",
		"~/.ssh":            "~/.ssh",
		"~/.ssh/keys":       "~/.ssh",
		"~/.local":          "~/.local/state/cco",
		"~/.codex/bin":      "~/.codex",
		"~/.claude/../.aws": "~/.aws",
		"rel/path":          "does not start with ~/",
	} {
		_, err := Parse([]string{entry}, protected)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "home_read_only") || !strings.Contains(err.Error(), "fix") {
			t.Errorf("Parse(%q) = %v, want an error naming home_read_only, %q and the fix", entry, err, want)
		}
	}
}

// TestDefaultIsValid: the shipped list parses, and none of it is a
// credential tree.
func TestDefaultIsValid(t *testing.T) {
	got, err := Parse(Default, protected)
	if err != nil || len(got) != len(Default) {
		t.Fatalf("the shipped list: %v", err)
	}
}

func TestMasks(t *testing.T) {
	if got := Masks([]string{".cargo/bin", ".nvm", ".local/share/uv/python"}); len(got) != 0 {
		t.Errorf("Masks = %q, want none (no credential directory lies in these trees)", got)
	}
	if got := Masks([]string{".local/share/uv"}); !slices.Contains(got, ".local/share/uv/credentials/") {
		t.Errorf("Masks(~/.local/share/uv) = %q, want uv's credentials", got)
	}
}
