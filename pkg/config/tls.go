package config

import (
	"fmt"
	"strings"
)

// TLSFiles is the `tls:` section of a node file: the PEM files of mutual TLS
// (docs/configuration.md, docs/rpc.md). Set all three, or none: without
// them every port of the node is plaintext, unauthenticated and
// unauthorized, which is for loopback demos only. pkg/rpc.TLSFiles has the
// same fields (convert with rpc.TLSFiles(n.TLS)).
type TLSFiles struct {
	CA   string `yaml:"ca"`   // the CA every peer's certificate must chain to
	Cert string `yaml:"cert"` // this node's certificate (role master)
	Key  string `yaml:"key"`  // its private key (0600)
}

// Enabled reports whether any file is named.
func (t TLSFiles) Enabled() bool { return t != TLSFiles{} }

// validate checks that the files are named together.
func (t TLSFiles) validate() error {
	if !t.Enabled() {
		return nil
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"tls.ca", t.CA}, {"tls.cert", t.Cert}, {"tls.key", t.Key}} {
		if strings.TrimSpace(f.v) == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("config: tls: set ca, cert and key together (missing %s)", strings.Join(missing, ", "))
	}
	return nil
}
