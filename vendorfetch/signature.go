package vendorfetch

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
)

// signer verifies Claude Code manifests against one configured key.
type signer struct {
	keyring     openpgp.EntityList
	fingerprint string
	path        string
}

// loadSigner reads an armored public key file and refuses it unless its
// primary key has the expected fingerprint: a configured key that is not
// the vendor's (or the operator's chosen one) must not quietly verify.
func loadSigner(path, fingerprint string) (*signer, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("claude.signing_key %s: %w", path, err)
	}
	defer f.Close()
	ring, err := openpgp.ReadArmoredKeyRing(f)
	if err != nil {
		return nil, fmt.Errorf("claude.signing_key %s is not an armored OpenPGP public key: %v", path, err)
	}
	want := strings.ToUpper(fingerprint)
	var keep openpgp.EntityList
	var seen []string
	for _, e := range ring {
		fp := strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))
		seen = append(seen, fp)
		if fp == want {
			keep = append(keep, e)
		}
	}
	if len(keep) == 0 {
		return nil, fmt.Errorf("claude.signing_key %s holds the key %s, not the expected %s: refusing it (fetch the vendor's key, or set claude.signing_fingerprint for a mirror's own key)", path, strings.Join(seen, ", "), want)
	}
	return &signer{keyring: keep, fingerprint: want, path: path}, nil
}

// verify checks sig (armored or binary) as a detached signature of data.
func (s *signer) verify(data, sig []byte, what string) error {
	var err error
	if bytes.HasPrefix(bytes.TrimSpace(sig), []byte("-----BEGIN")) {
		_, err = openpgp.CheckArmoredDetachedSignature(s.keyring, bytes.NewReader(data), bytes.NewReader(sig), nil)
	} else {
		_, err = openpgp.CheckDetachedSignature(s.keyring, bytes.NewReader(data), bytes.NewReader(sig), nil)
	}
	if err != nil {
		return fmt.Errorf("the OpenPGP signature of %s does not verify with the key %s (%v): refusing the release", what, s.fingerprint, err)
	}
	return nil
}

// versionLess compares dotted numeric versions (suffixes ignored), for the
// "older than the first signed release" rule.
func versionLess(a, b string) bool {
	pa, pb := numParts(a), numParts(b)
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func numParts(v string) []int {
	v, _, _ = strings.Cut(v, "-")
	var out []int
	for _, p := range strings.Split(v, ".") {
		n := 0
		for _, c := range p {
			if c < '0' || c > '9' || n > 1<<30 {
				break
			}
			n = n*10 + int(c-'0')
		}
		out = append(out, n)
	}
	return out
}
