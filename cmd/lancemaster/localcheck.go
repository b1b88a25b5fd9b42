package main

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// Checks of flag values the CLI can make by itself, before any request:
// a bad value is a usage error (exit 2) naming the flag, never a call that
// fails on the master or an unreachable master (exit 3).

// checkWaitFlags checks --timeout-total of --wait before the admission.
func checkWaitFlags(cmd *cobra.Command) error {
	if wait, _ := cmd.Flags().GetBool(flagWait); !wait {
		return nil
	}
	if total, _ := cmd.Flags().GetDuration("timeout-total"); total < 0 {
		return usagef("--timeout-total must not be negative (0 = no limit), got %s", total)
	}
	return nil
}

// checkIndexType is create-index --type: a type admission accepts.
func checkIndexType(t string) (string, error) {
	u, err := job.NormalizeIndexType(t)
	if err != nil {
		return "", usagef("--type: %s", errText(err))
	}
	return u, nil
}

// checkCatalogFlags checks a catalog's flags that are given and not empty
// (an empty one clears the field on the master), as the master would.
func checkCatalogFlags(r catalogRequestFields) error {
	if r.root != nil && strings.TrimSpace(*r.root) != "" {
		if _, err := job.NormalizeLocator(*r.root); err != nil {
			return usagef("--root: %s", errText(err))
		}
	}
	if r.credentials != nil && *r.credentials != "" {
		if err := job.ValidatePathName("credentials reference", *r.credentials); err != nil {
			return usagef("--credentials: %s", errText(err))
		}
	}
	if r.refreshCreds != nil && *r.refreshCreds != "" {
		if err := raftfsm.ValidateRefreshCredentialsRef(*r.refreshCreds); err != nil {
			return usagef("--refresh-credentials: %s", errText(err))
		}
	}
	if r.kind != nil {
		switch strings.TrimSpace(*r.kind) {
		case "", raftfsm.RefreshNone, raftfsm.RefreshWebhook, raftfsm.RefreshMySQL:
		default:
			return usagef("--refresh-kind must be none, webhook or mysql, got %q", *r.kind)
		}
	}
	if r.url != nil && *r.url != "" {
		u, err := url.Parse(*r.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--refresh-url must be an http or https URL, got %q", *r.url)
		}
	}
	if r.address != nil && *r.address != "" {
		if err := raftfsm.ValidateRefreshAddress(*r.address); err != nil {
			return usagef("--refresh-address: %s", errText(err))
		}
	}
	return nil
}

// checkTLSFiles checks that every TLS file named exists and is a file.
func (g *globals) checkTLSFiles() error {
	for _, f := range []struct{ flag, env, path string }{
		{flagTLSCA, envTLSCA, g.tls.CA}, {flagTLSCert, envTLSCert, g.tls.Cert}, {flagTLSKey, envTLSKey, g.tls.Key},
	} {
		if f.path == "" {
			continue
		}
		if st, err := os.Stat(f.path); err != nil || st.IsDir() {
			return usagef("--%s (or %s) %q is not a readable file", f.flag, f.env, f.path)
		}
	}
	return nil
}

// checkReadable is a FILE argument that must exist.
func checkReadable(what, path string) error {
	if st, err := os.Stat(path); err != nil || st.IsDir() {
		return usagef("%s: %q is not a readable file", what, path)
	}
	return nil
}

// checkWritableDir is the directory a FILE argument will be written in.
func checkWritableDir(what, path string) error {
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return usagef("%s: the directory of %q does not exist", what, path)
	}
	return nil
}

// errText is a domain error's message without its code.
func errText(err error) string {
	var je *job.Error
	if errors.As(err, &je) {
		return je.Message
	}
	return err.Error()
}
