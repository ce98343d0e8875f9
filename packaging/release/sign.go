package release

import (
	"fmt"
	"os"
	"strings"

	"github.com/goreleaser/nfpm/v2"
)

// signature sets the package's signing key from the nfpm section (or
// Options.SigningKey, which overrides it), the way goreleaser's nfpm pipe
// does: nfpm itself signs the deb (a debsign _gpgorigin member) and the rpm
// (header and payload signatures).
func (o *Options) signature(info *nfpm.Info, n *NFPM, format string, data map[string]any) error {
	what := "nfpms." + n.ID + "." + format + ".signature.key_file"
	tmpl := n.RPM.Signature.KeyFile
	if format == "deb" {
		tmpl = n.Deb.Signature.KeyFile
	}
	key, err := expand(what, tmpl, data)
	if err != nil {
		return err
	}
	if o.SigningKey != "" {
		key = o.SigningKey
	}
	if key == "" {
		return nil
	}
	if _, err := os.Stat(key); err != nil {
		return fmt.Errorf("%s: the signing key: %w (give an OpenPGP secret key file)", what, err)
	}
	pass := passphrase(n.ID, format)
	switch format {
	case "deb":
		info.Deb.Signature.KeyFile, info.Deb.Signature.KeyPassphrase = key, pass
		info.Deb.Signature.Type = n.Deb.Signature.Type
	case "rpm":
		info.RPM.Signature.KeyFile, info.RPM.Signature.KeyPassphrase = key, pass
	}
	return nil
}

// passphrase is goreleaser's lookup: the most specific variable set wins.
func passphrase(id, format string) string {
	id = strings.ToUpper(strings.ReplaceAll(id, "-", "_"))
	for _, k := range []string{"NFPM_" + id + "_" + strings.ToUpper(format) + "_PASSPHRASE", "NFPM_" + id + "_PASSPHRASE", "NFPM_PASSPHRASE"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return ""
}
