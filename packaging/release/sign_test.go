package release

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blakesmith/ar"

	"github.com/cco-dev/cco/packaging/signing"
)

// throwawayKey writes a new secret key and returns it with its file.
func throwawayKey(t *testing.T, name string) (*signing.Key, string) {
	t.Helper()
	k, err := signing.Generate(name, "release@cco-dev.invalid")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "key.asc")
	if err := k.WriteSecret(p); err != nil {
		t.Fatal(err)
	}
	return k, p
}

// The signing key given at release time signs both packages: the deb
// carries a debsign _gpgorigin signature of its members, the rpm header
// and payload signatures that rpm -K checks against an imported key, and
// a key that did not sign is not taken for the one that did.
func TestPackagesAreSigned(t *testing.T) {
	key, keyFile := throwawayKey(t, "cco test release key")
	other, _ := throwawayKey(t, "another key")
	t.Setenv("CCO_SIGNING_KEY_FILE", keyFile)
	m := buildAll(t, "0.2.0", time.Unix(1700000000, 0))

	members := map[string][]byte{}
	f, err := os.Open(m["deb"].Path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var order []string
	for r := ar.NewReader(f); ; {
		h, err := r.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		name := strings.TrimSuffix(h.Name, "/")
		members[name] = b
		order = append(order, name)
	}
	sig, ok := members["_gpgorigin"]
	if !ok {
		t.Fatalf("the deb has no _gpgorigin signature: members %v", order)
	}
	var signed []byte
	for _, n := range order {
		if n != "_gpgorigin" {
			signed = append(signed, members[n]...)
		}
	}
	pub, _ := key.PublicKey(true)
	if err := signing.Verify(pub, signed, sig); err != nil {
		t.Errorf("the deb's _gpgorigin does not verify with the signing key: %v", err)
	}
	otherPub, _ := other.PublicKey(true)
	if signing.Verify(otherPub, signed, sig) == nil {
		t.Error("the deb's signature verifies with a key that did not sign it")
	}
	if signing.Verify(pub, append(signed, 'x'), sig) == nil {
		t.Error("the deb's signature verifies over other bytes")
	}

	for _, tc := range []struct {
		key  []byte
		want string
	}{{pub, "digests signatures OK"}, {otherPub, "SIGNATURES NOT OK"}} {
		db := t.TempDir()
		keyPath := filepath.Join(db, "key.asc")
		os.WriteFile(keyPath, tc.key, 0o644)
		run(t, "rpm", "--dbpath", db, "--import", keyPath)
		cmd := []string{"--dbpath", db, "-K", m["rpm"].Path}
		got := rpmOutput(t, cmd...)
		if !strings.Contains(got, tc.want) {
			t.Errorf("rpm -K with the %s key: %q, want %q", map[bool]string{true: "signing", false: "other"}[bytes.Equal(tc.key, pub)], got, tc.want)
		}
	}
}

// rpmOutput runs rpm and returns its output whatever its exit code: rpm -K
// exits 1 for a signature it cannot check, which is a result here.
func rpmOutput(t *testing.T, args ...string) string {
	t.Helper()
	run(t, "rpm", "--version") // the tool check
	out, _ := exec.Command("rpm", args...).CombinedOutput()
	return string(out)
}

// A release without a key builds unsigned packages, and a key_file that
// does not exist is an error that names it.
func TestSigningKeyMissing(t *testing.T) {
	t.Setenv("CCO_SIGNING_KEY_FILE", filepath.Join(t.TempDir(), "absent.asc"))
	f, err := Load("../../goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o := &Options{Repo: "../..", Dist: t.TempDir(), Version: "0.2.0", Arches: []string{"amd64"}, Formats: []string{"deb"}, Epoch: time.Unix(1700000000, 0), Prebuilt: standIns(t)}
	if _, err := BuildBinaries(context.Background(), f, o); err != nil {
		t.Fatal(err)
	}
	if err := Generate(context.Background(), f, o); err != nil {
		t.Fatal(err)
	}
	_, err = o.Info(f, &f.NFPMs[0], "amd64", "deb")
	if err == nil || !strings.Contains(err.Error(), "absent.asc") || !strings.Contains(err.Error(), "signature.key_file") {
		t.Errorf("a missing key file: %v", err)
	}
	t.Setenv("CCO_SIGNING_KEY_FILE", "")
	info, err := o.Info(f, &f.NFPMs[0], "amd64", "deb")
	if err != nil {
		t.Fatal(err)
	}
	if info.Deb.Signature.KeyFile != "" {
		t.Errorf("without CCO_SIGNING_KEY_FILE the deb is signed with %q", info.Deb.Signature.KeyFile)
	}
}
