// Package signing reads the release's OpenPGP signing key and signs
// repository indexes with it (apt's InRelease and Release.gpg, an rpm
// repository's repomd.xml.asc), with ProtonMail's go-crypto, the library
// nfpm signs the packages with. Generate makes a throwaway key for tests.
package signing

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// config signs with SHA-512: apt refuses SHA-1 signatures.
var config = &packet.Config{DefaultHash: crypto.SHA512}

// Key is a secret key that can sign.
type Key struct {
	Entity *openpgp.Entity
}

// Load reads an OpenPGP secret key file, armored or binary, and unlocks it
// with passphrase when it is protected.
func Load(path, passphrase string) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the signing key: %w", err)
	}
	var list openpgp.EntityList
	if bytes.Contains(b, []byte("-----BEGIN PGP")) {
		list, err = openpgp.ReadArmoredKeyRing(bytes.NewReader(b))
	} else {
		list, err = openpgp.ReadKeyRing(bytes.NewReader(b))
	}
	if err != nil {
		return nil, fmt.Errorf("%s is not an OpenPGP key: %v", path, err)
	}
	if len(list) != 1 || list[0].PrivateKey == nil {
		return nil, fmt.Errorf("%s: want exactly one secret key (gpg --export-secret-keys --armor KEYID), found %d keys", path, len(list))
	}
	e := list[0]
	if e.PrivateKey.Encrypted {
		if passphrase == "" {
			return nil, fmt.Errorf("%s is protected by a passphrase: set NFPM_PASSPHRASE", path)
		}
		if err := e.DecryptPrivateKeys([]byte(passphrase)); err != nil {
			return nil, fmt.Errorf("%s: the passphrase does not unlock it: %v", path, err)
		}
	}
	return &Key{Entity: e}, nil
}

// Generate makes a new RSA key for name (tests only: a release's key is
// made and kept by its owners).
func Generate(name, email string) (*Key, error) {
	e, err := openpgp.NewEntity(name, "", email, &packet.Config{RSABits: 2048, DefaultHash: crypto.SHA512})
	if err != nil {
		return nil, err
	}
	return &Key{Entity: e}, nil
}

// Fingerprint is the key's fingerprint in upper-case hex.
func (k *Key) Fingerprint() string { return fmt.Sprintf("%X", k.Entity.PrimaryKey.Fingerprint) }

// WriteSecret writes the armored secret key (for nfpm's key_file).
func (k *Key) WriteSecret(path string) error {
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PrivateKeyType, nil)
	if err != nil {
		return err
	}
	if err := k.Entity.SerializePrivate(w, config); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o600)
}

// PublicKey is the public key, binary (a keyring for apt's signed-by=) or
// armored (for rpm --import and dnf's gpgkey=).
func (k *Key) PublicKey(armored bool) ([]byte, error) {
	var buf bytes.Buffer
	var w io.WriteCloser = nopCloser{&buf}
	if armored {
		var err error
		if w, err = armor.Encode(&buf, openpgp.PublicKeyType, nil); err != nil {
			return nil, err
		}
	}
	if err := k.Entity.Serialize(w); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// ClearSign returns data clear-signed (apt's InRelease).
func (k *Key) ClearSign(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := clearsign.Encode(&buf, k.Entity.PrivateKey, config)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DetachSign returns an armored detached signature of data (apt's
// Release.gpg, repomd.xml.asc).
func (k *Key) DetachSign(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&buf, k.Entity, bytes.NewReader(data), config); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Verify checks an armored detached signature of data against public, an
// armored or binary public key.
func Verify(public, data, sig []byte) error {
	var list openpgp.EntityList
	var err error
	if bytes.Contains(public, []byte("-----BEGIN PGP")) {
		list, err = openpgp.ReadArmoredKeyRing(bytes.NewReader(public))
	} else {
		list, err = openpgp.ReadKeyRing(bytes.NewReader(public))
	}
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return errors.New("no public key")
	}
	_, err = openpgp.CheckArmoredDetachedSignature(list, bytes.NewReader(data), bytes.NewReader(sig), nil)
	return err
}
