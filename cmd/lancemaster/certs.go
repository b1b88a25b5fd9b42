package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/pkg/certs"
)

// newCertsCmd is the development PKI (`make certs`). It is hidden from the
// help: production certificates come from the operator's own CA, with the
// CA key kept offline (docs/operations.md, "Certificate rotation").
func newCertsCmd() *cobra.Command {
	var (
		dir, hosts           string
		validity, caValidity time.Duration
		newCA                bool
	)
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Write a development CA and a master, a backend and an operator certificate",
		Long: "Write a development CA (ca.pem, ca-key.pem) and one ECDSA P-256 certificate per role\n" +
			"(master.pem, backend.pem, operator.pem, each with its -key.pem) into --dir. Each\n" +
			"certificate carries its role as the URI SAN spiffe://lancemaster/role/<role>; the\n" +
			"master and backend certificates name --hosts as DNS or IP SANs. Keys are 0600.\n" +
			"An existing CA in --dir is reused (unless --new-ca), so running it again rotates\n" +
			"the certificates. For development only: the CA key stays in --dir.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var hs []string
			for _, h := range strings.Split(hosts, ",") {
				if h = strings.TrimSpace(h); h != "" {
					hs = append(hs, h)
				}
			}
			if dir == "" {
				return usagef("--dir is required")
			}
			if len(hs) == 0 {
				return usagef("--hosts needs at least one DNS name or IP address")
			}
			if validity <= 0 || caValidity <= 0 {
				return usagef("--validity and --ca-validity must be positive")
			}
			res, err := certs.WriteDevCerts(dir, certs.DevOptions{Hosts: hs, Validity: validity, CAValidity: caValidity, NewCA: newCA})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if res.CAReused {
				fmt.Fprintf(out, "reused the CA in %s (valid until %s)\n", res.Dir, res.CA.NotAfter.UTC().Format(time.RFC3339))
			} else {
				fmt.Fprintf(out, "made a new development CA (valid until %s)\n", res.CA.NotAfter.UTC().Format(time.RFC3339))
			}
			for _, f := range res.Files {
				fmt.Fprintln(out, "wrote", f)
			}
			fmt.Fprintf(out, "certificates are valid for %s; hosts: %s\n", validity, strings.Join(hs, ", "))
			return nil
		},
	}
	fs := initCmd.Flags()
	fs.StringVar(&dir, "dir", "", "directory to write into (created 0700)")
	fs.StringVar(&hosts, "hosts", "127.0.0.1,localhost", "comma-separated DNS names and IP addresses of the master and backend certificates")
	fs.DurationVar(&validity, "validity", certs.DefaultValidity, "lifetime of the certificates")
	fs.DurationVar(&caValidity, "ca-validity", certs.DefaultCAValidity, "lifetime of a new CA")
	fs.BoolVar(&newCA, "new-ca", false, "make a new CA even when --dir holds one")

	c := groupCmd("certs", "Development certificates for mutual TLS (make certs)", initCmd)
	c.Hidden = true
	return c
}
