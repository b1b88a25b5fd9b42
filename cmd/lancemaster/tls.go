package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// Mutual TLS flags (docs/rpc.md). They are global: the CLI presents an
// operator certificate with them, and serve and backend accept them as
// overrides of their config file's tls section.
const (
	flagTLSCA   = "tls-ca"
	flagTLSCert = "tls-cert"
	flagTLSKey  = "tls-key"

	envTLSCA   = "LANCEMASTER_TLS_CA"
	envTLSCert = "LANCEMASTER_TLS_CERT"
	envTLSKey  = "LANCEMASTER_TLS_KEY"
)

// bindTLSFlags registers --tls-ca, --tls-cert and --tls-key on pf, with
// defaults from the environment. The environment is the CLI's only: serve
// and backend read the flags only when given on their command line
// (daemonTLS), so a shell holding an operator's certificate cannot make a
// daemon present it.
func bindTLSFlags(pf *pflag.FlagSet, f *rpc.TLSFiles, getenv func(string) string) {
	pf.StringVar(&f.CA, flagTLSCA, getenv(envTLSCA),
		"CA certificate (PEM) the masters' certificates chain to; with --tls-cert and --tls-key turns on mutual TLS (env "+envTLSCA+")")
	pf.StringVar(&f.Cert, flagTLSCert, getenv(envTLSCert), "client certificate (PEM), an operator's (env "+envTLSCert+")")
	pf.StringVar(&f.Key, flagTLSKey, getenv(envTLSKey), "the client certificate's private key (PEM) (env "+envTLSKey+")")
}

// applyTLS loads the CLI's certificates into cfg when any TLS flag or
// variable is set.
func (g *globals) applyTLS(cfg *rpc.Config) error {
	if !g.tls.Enabled() {
		return nil
	}
	if err := g.tls.Validate(); err != nil {
		return usagef("%v (--%s, --%s, --%s or %s, %s, %s)", err, flagTLSCA, flagTLSCert, flagTLSKey, envTLSCA, envTLSCert, envTLSKey)
	}
	if err := g.checkTLSFiles(); err != nil {
		return err
	}
	// Any role: the masters decide what it may call (an operator's may
	// call every admin method).
	c, err := g.tls.Load("", nil)
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	cfg.Certs = c
	cfg.TLSServerName = strings.TrimSpace(g.tlsServerName)
	return nil
}

// daemonTLS overrides a daemon's configured TLS files with the --tls-*
// flags given on its command line (the environment is ignored).
func daemonTLS(cmd *cobra.Command, ca, cert, key *string) {
	fs := cmd.Flags()
	for _, f := range []struct {
		name string
		dst  *string
	}{{flagTLSCA, ca}, {flagTLSCert, cert}, {flagTLSKey, key}} {
		if fs.Changed(f.name) {
			*f.dst, _ = fs.GetString(f.name)
		}
	}
}
