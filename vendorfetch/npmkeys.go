package vendorfetch

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// publicRegistryKeys is registry.npmjs.org/-/npm/v1/keys as shipped with
// cco: the registry's own answer is not a trust anchor (whoever serves the
// packument could serve keys too).
//
//go:embed npm-keys.json
var publicRegistryKeys []byte

// npmKey is one registry signing key.
type npmKey struct {
	keyID   string
	expires time.Time // zero: does not expire
	pub     *ecdsa.PublicKey
	from    string // where it was read, for messages
}

// keysDoc is the form of a registry's /-/npm/v1/keys answer.
type keysDoc struct {
	Keys []struct {
		Expires *string `json:"expires"`
		KeyID   string  `json:"keyid"`
		KeyType string  `json:"keytype"`
		Scheme  string  `json:"scheme"`
		Key     string  `json:"key"`
	} `json:"keys"`
}

// parseNpmKeys reads a keys document; from names it in errors.
func parseNpmKeys(b []byte, from string) ([]npmKey, error) {
	var d keysDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s is not a registry keys document ({\"keys\": [...]}, as /-/npm/v1/keys answers): %v", from, err)
	}
	if len(d.Keys) == 0 {
		return nil, fmt.Errorf("%s holds no keys", from)
	}
	var out []npmKey
	for i, k := range d.Keys {
		// npm verifies ECDSA P-256 over SHA-256 only; any other key
		// could never verify a registry signature.
		if k.KeyType != "ecdsa-sha2-nistp256" || k.Scheme != "ecdsa-sha2-nistp256" {
			return nil, fmt.Errorf("%s: key %d (%s) is %s/%s; registry signatures are ecdsa-sha2-nistp256", from, i, k.KeyID, k.KeyType, k.Scheme)
		}
		if k.KeyID == "" {
			return nil, fmt.Errorf("%s: key %d has no keyid", from, i)
		}
		der, err := base64.StdEncoding.DecodeString(k.Key)
		if err != nil {
			return nil, fmt.Errorf("%s: key %s is not base64: %v", from, k.KeyID, err)
		}
		pk, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			return nil, fmt.Errorf("%s: key %s is not a public key: %v", from, k.KeyID, err)
		}
		ec, ok := pk.(*ecdsa.PublicKey)
		if !ok || ec.Curve != elliptic.P256() {
			return nil, fmt.Errorf("%s: key %s is not an ECDSA P-256 key", from, k.KeyID)
		}
		nk := npmKey{keyID: k.KeyID, pub: ec, from: from}
		if k.Expires != nil && *k.Expires != "" {
			if nk.expires, err = time.Parse(time.RFC3339, *k.Expires); err != nil {
				return nil, fmt.Errorf("%s: key %s: expires %q is not a time: %v", from, k.KeyID, *k.Expires, err)
			}
		}
		out = append(out, nk)
	}
	return out, nil
}

// loadNpmKeys is the shipped public registry keys and those of the file
// npm_keys names.
func loadNpmKeys(path string) ([]npmKey, error) {
	keys, err := parseNpmKeys(publicRegistryKeys, "the shipped keys of "+PublicRegistry)
	if err != nil {
		return nil, err
	}
	if path == "" {
		return keys, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("npm_keys %s: %w (save a registry's keys with curl REGISTRY/-/npm/v1/keys)", path, err)
	}
	more, err := parseNpmKeys(b, "npm_keys "+path)
	if err != nil {
		return nil, err
	}
	return append(keys, more...), nil
}

// npmSignature is one entry of dist.signatures.
type npmSignature struct {
	KeyID string `json:"keyid"`
	Sig   string `json:"sig"`
}

// verifyNpmSignatures checks the registry's signatures of name@version
// with integrity, published at published (zero: unknown). It passes when a
// trusted, unexpired key's signature verifies; a trusted key's signature
// that does not verify fails, whatever else verifies: the packument was
// altered. It returns the keyid that verified.
func verifyNpmSignatures(keys []npmKey, sigs []npmSignature, name, version, integrity string, published time.Time) (string, error) {
	msg := sha256.Sum256([]byte(name + "@" + version + ":" + integrity))
	good := ""
	var unknown []string
	for _, s := range sigs {
		var key *npmKey
		for i := range keys {
			if keys[i].keyID == s.KeyID {
				key = &keys[i]
			}
		}
		if key == nil {
			unknown = append(unknown, s.KeyID)
			continue
		}
		// An expired key vouches only for what was published before it
		// expired (npm's rule); with no publish time, not at all.
		if !key.expires.IsZero() && (published.IsZero() || !published.Before(key.expires)) {
			unknown = append(unknown, s.KeyID+" (expired "+key.expires.Format(time.DateOnly)+")")
			continue
		}
		der, err := base64.StdEncoding.DecodeString(s.Sig)
		if err != nil || !ecdsa.VerifyASN1(key.pub, msg[:], der) {
			return "", fmt.Errorf("the registry signature of %s@%s by key %s (%s) does not verify: the packument or its integrity was altered; refusing it; nothing was installed (fix: find who changed the registry's copy of %s@%s, and check npm_keys names this registry's keys)", name, version, s.KeyID, key.from, name, version)
		}
		good = s.KeyID
	}
	if good != "" {
		return good, nil
	}
	return "", fmt.Errorf("%s@%s is signed only by keys cco does not trust (%v): set npm_keys to a file with the registry's keys (curl REGISTRY/-/npm/v1/keys > FILE, checked out of band)", name, version, unknown)
}
