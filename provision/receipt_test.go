package provision

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision/provisiontest/treehash"
)

func TestReceiptMarshalCanonical(t *testing.T) {
	paths := []string{"/usr/local/bin/claude", "/etc/cco/sandbox.toml", "/usr/local/bin/codex", "/a", "/z/y"}
	relocs := []Relocation{
		{From: "/usr/local/bin/claude", To: StateDir + "/relocated/claude.2", Step: "takeover"},
		{From: "/usr/bin/codex", To: StateDir + "/relocated/codex", Step: "takeover"},
		{From: "/usr/local/bin/claude", To: StateDir + "/relocated/claude.1", Step: "takeover"},
	}
	build := func(order []int) *Receipt {
		rc := NewReceipt()
		rc.Dirs = map[string]DirRecord{}
		rc.Extra = map[string]json.RawMessage{}
		for _, i := range order {
			p := paths[i]
			rc.Paths[p] = &Entry{Kind: KindFile, SHA256: sum([]byte(p)), Mode: "0755", Step: "s" + p, Version: "v1"}
			rc.Dirs[p+".d"] = DirRecord{Step: "s"}
			rc.Extra["step"+p] = json.RawMessage(`{"k": [1, 2]}`)
		}
		for _, i := range order {
			if i < len(relocs) {
				rc.Relocations = append(rc.Relocations, relocs[i])
			}
		}
		return rc
	}
	first, err := build([]int{0, 1, 2, 3, 4}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, order := range [][]int{{4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}, {1, 2, 0, 4, 3}} {
		b, err := build(order).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, first) {
			t.Fatalf("insertion order %v changed the bytes:\n%s\nvs\n%s", order, b, first)
		}
	}
	if !bytes.HasSuffix(first, []byte("}\n")) {
		t.Fatal("the receipt does not end in a newline")
	}
	// What is marshalled loads back as the same receipt.
	r := newRoot(t)
	rc := build([]int{0, 1, 2, 3, 4})
	if _, err := rc.Save(r, nil); err != nil {
		t.Fatal(err)
	}
	back, raw, err := LoadReceipt(r)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.Marshal()
	if !bytes.Equal(raw, first) || !bytes.Equal(again, first) {
		t.Fatal("a saved receipt does not load back byte-identical")
	}
}

func TestLoadReceiptErrors(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"garbage", "this is not json", []string{"does not parse", "restore it from a backup", "move it away"}},
		{"truncated", `{"schema": 1, "paths": {"/x": {"kind": "fi`, []string{"does not parse"}},
		{"wrong type", `{"schema": "one"}`, []string{"does not parse"}},
		{"newer schema", `{"schema": 2, "paths": {}}`, []string{"schema 2", "newer cco-install"}},
		{"no schema", `{"paths": {}}`, []string{"no schema", "not a cco receipt"}},
		{"null", `null`, []string{"not a cco receipt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRoot(t)
			writeHost(t, r.HostPath(ReceiptPath), []byte(tc.content), 0o644)
			rc, _, err := LoadReceipt(r)
			if err == nil {
				t.Fatalf("loaded %+v", rc)
			}
			for _, w := range append(tc.want, r.HostPath(ReceiptPath)) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			// A run refuses to start rather than treat every file as foreign.
			if _, err := NewRun(t.Context(), r); err == nil {
				t.Fatal("NewRun accepted the bad receipt")
			}
			if got := readHost(t, r.HostPath(ReceiptPath)); string(got) != tc.content {
				t.Fatal("the bad receipt was changed")
			}
		})
	}
}

func TestLoadReceiptMissing(t *testing.T) {
	rc, raw, err := LoadReceipt(newRoot(t))
	if err != nil || raw != nil || rc.Schema != ReceiptSchema || rc.Paths == nil || len(rc.Paths) != 0 {
		t.Fatalf("a missing receipt = %+v %q %v, want an empty one", rc, raw, err)
	}
}

// Save writes only when the content changed, and never an empty receipt
// where there was none.
func TestReceiptSave(t *testing.T) {
	r := newRoot(t)
	rc := NewReceipt()
	last, err := rc.Save(r, nil)
	if err != nil || last != nil {
		t.Fatalf("saving an empty receipt: %q, %v", last, err)
	}
	if names := treehash.List(r.Dir()); len(names) != 0 {
		t.Fatalf("saving an empty receipt created %v", names)
	}
	rc.Paths["/x"] = &Entry{Kind: KindFile, Mode: "0644", Step: "s"}
	if last, err = rc.Save(r, nil); err != nil || !bytes.Equal(last, receiptBytes(t, r)) {
		t.Fatalf("save: %v", err)
	}
	st := *lstatT(t, r.HostPath(ReceiptPath))
	if again, err := rc.Save(r, last); err != nil || !bytes.Equal(again, last) {
		t.Fatalf("save again: %v", err)
	}
	if now := lstatT(t, r.HostPath(ReceiptPath)); now.Ino != st.Ino || now.Mtim != st.Mtim {
		t.Fatal("an unchanged receipt was rewritten")
	}
	if fi := lstatT(t, r.HostPath(ReceiptPath)); fi.Mode&0o777 != 0o644 {
		t.Fatalf("receipt mode %o", fi.Mode&0o777)
	}
}
