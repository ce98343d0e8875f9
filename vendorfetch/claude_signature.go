package vendorfetch

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/cco-dev/cco/provision"
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
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("claude.signing_key %s: %w", path, err)
	}
	return parseSigner(b, "claude.signing_key "+path, fingerprint)
}

// parseSigner reads an armored public key (from names where it came from).
func parseSigner(b []byte, from, fingerprint string) (*signer, error) {
	path := from
	ring, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s is not an armored OpenPGP public key: %v", from, err)
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
		return nil, fmt.Errorf("%s holds the key %s, not the expected %s: refusing it (fetch the vendor's key, or set claude.signing_fingerprint for a mirror's own key)", path, strings.Join(seen, ", "), want)
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

// KeyCachePath is where the vendor's key is kept once it was fetched and
// matched the pinned fingerprint: later runs (and offline ones) use it.
const KeyCachePath = provision.StateDir + "/keys/claude-code.asc"

// VendorKeyURL is where Anthropic publishes the key that signs manifests.
const VendorKeyURL = "https://downloads.claude.ai/keys/claude-code.asc"

// keyURLs are where the key is looked for: the vendor's published URL
// when the store is the vendor's, else the mirror's own copy, laid out like
// the vendor (<base>/../keys/claude-code.asc). A mirror's run never reaches
// past the mirror.
func keyURLs(cfg Config) []string {
	base := strings.TrimRight(cfg.Claude.BaseURL, "/")
	if base == strings.TrimRight(DefaultConfig().Claude.BaseURL, "/") {
		return []string{VendorKeyURL}
	}
	if i := strings.LastIndex(base, "/"); i > len("https://") {
		return []string{base[:i] + "/keys/claude-code.asc"}
	}
	return []string{base + "/keys/claude-code.asc"}
}

// defaultSigner is the signature check when claude.signing_key is not set:
// on by default, anchored in the pinned fingerprint. The key comes from the
// cache, else the store or the vendor (and is then cached). It returns the
// key's bytes when they are to be cached, and why there is no key when
// none could be had (the run then checks sha256 only, and says so once).
func defaultSigner(ctx context.Context, run *provision.View, src source, cfg Config) (*signer, []byte, string, error) {
	fp := cfg.Claude.SigningFingerprint
	if b, err := run.Root.ReadFile(KeyCachePath); err == nil {
		sg, err := parseSigner(b, "the cached key "+KeyCachePath, fp)
		if err == nil {
			return sg, nil, "", nil
		}
		// A cached key for another fingerprint (the pin was changed):
		// fetch the right one below.
	}
	if _, ok := src.(*netSource); !ok {
		return nil, nil, "the vendor's signing key is not cached at " + KeyCachePath + " and a bundle run fetches nothing", nil
	}
	var why []string
	for _, u := range keyURLs(cfg) {
		b, err := src.small(ctx, u)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		sg, err := parseSigner(b, u, fp)
		if err != nil {
			// A key that is not the pinned one is an integrity failure:
			// loud, and not passed over for the next source.
			return nil, nil, "", err
		}
		return sg, b, "", nil
	}
	return nil, nil, "the vendor's signing key could not be fetched (" + strings.Join(why, "; ") + ")", nil
}
