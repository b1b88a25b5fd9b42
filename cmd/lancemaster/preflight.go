package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// Preflight: what a start would check, without starting — `config validate
// FILE`, `serve --dry-run`, `backend --dry-run`. Nothing is created or
// written: data directories are looked at, never made, and listen addresses
// are bound for an instant and released.

// checkTLS loads the certificate files as the daemon would (role checked).
func checkTLS(f rpc.TLSFiles, role certs.Role) error {
	if !f.Enabled() {
		return nil
	}
	_, err := f.Load(role, nil)
	return err
}

// checkDataDir: an existing directory this process may write, or a path
// whose nearest existing parent it may write (the start would create it).
func checkDataDir(field, dir string) error {
	if dir == "" {
		return nil
	}
	p := filepath.Clean(dir)
	for {
		st, err := os.Stat(p)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s %s: %s is not a directory", field, dir, p)
			}
			if err := unix.Access(p, unix.W_OK|unix.X_OK); err != nil {
				return fmt.Errorf("%s %s: %s is not writable by this user: %v", field, dir, p, err)
			}
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s %s: %v", field, dir, err)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return fmt.Errorf("%s %s: no existing parent directory", field, dir)
		}
		p = parent
	}
}

// checkBind binds addr for an instant: an address in use, or one this host
// does not have, fails here as it would at start.
func checkBind(field, addr string) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s %s: %v", field, addr, err)
	}
	return ln.Close()
}

// masterPreflight checks a validated node configuration; dry adds the
// checks of the host (directories, listen addresses).
func masterPreflight(n *config.Node, dry bool) error {
	errs := []error{checkTLS(n.TLS, certs.RoleMaster)}
	if dry {
		errs = append(errs, checkDataDir("data_dir", n.DataDir),
			checkBind("rpc_bind", n.RPCBind), checkBind("raft_bind", n.RaftBind), checkBind("http_bind", n.HTTPBind))
	}
	return errors.Join(errs...)
}

// secretsWarning: a start does not need the secrets directory (it is read
// at every send), but a catalog's credentials will not resolve without it.
func secretsWarning(n *config.Node) string {
	if n.SecretsDir == "" {
		return ""
	}
	if st, err := os.Stat(n.SecretsDir); err != nil || !st.IsDir() {
		return fmt.Sprintf("warning: secrets_dir %s is not a readable directory yet: credentials references will not resolve until it is", n.SecretsDir)
	}
	return ""
}

// backendPreflight is masterPreflight for a backend file.
func backendPreflight(fc *backend.FileConfig, dry bool) error {
	errs := []error{checkTLS(fc.TLS, certs.RoleBackend)}
	if len(fc.Worker) > 0 {
		if _, err := exec.LookPath(fc.Worker[0]); err != nil {
			errs = append(errs, fmt.Errorf("worker %s: %v", fc.Worker[0], err))
		}
	}
	if dry {
		errs = append(errs, checkDataDir("data_dir", fc.DataDir),
			checkBind("listen", fc.Listen), checkBind("http_listen", fc.HTTPListen))
	}
	return errors.Join(errs...)
}

func newConfigValidateCmd() *cobra.Command {
	var isBackend bool
	c := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a master (or, with --backend, a backend) configuration file without starting anything",
		Long: "Decode and check a configuration file as a start would: unknown keys, values, peers,\n" +
			"certificate files (loaded, role checked), the secrets directory and the worker command.\n" +
			"It contacts no master and touches no data directory. `serve --dry-run` and\n" +
			"`backend --dry-run` also check the host: data directory writable, listen addresses free.",
		Example: "  lancemaster config validate /etc/lancemaster/master.yaml\n" +
			"  lancemaster config validate --backend /etc/lancemaster/backend.yaml",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var what string
			if isBackend {
				fc, err := backend.LoadFileConfig(args[0])
				if err == nil {
					err = fc.Validate()
				}
				if err == nil {
					err = backendPreflight(fc, false)
				}
				if err != nil {
					return usagef("%v", err)
				}
				what = fmt.Sprintf("backend configuration %s is valid (listen %s, %d masters)", args[0], fc.Listen, len(fc.Masters))
			} else {
				n, err := config.LoadNode(args[0])
				if err == nil {
					err = n.Validate()
				}
				if err == nil {
					err = masterPreflight(n, false)
				}
				if err != nil {
					return usagef("%v", err)
				}
				what = fmt.Sprintf("master configuration %s is valid (node %s, %d peers)", args[0], n.NodeID, len(n.Peers))
				if w := secretsWarning(n); w != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), w)
				}
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), what)
			return err
		},
	}
	c.Flags().BoolVar(&isBackend, "backend", false, "the file is a backend's (lancemaster backend --config)")
	return c
}
