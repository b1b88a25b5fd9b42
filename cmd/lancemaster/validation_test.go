package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Every flag or argument value the CLI can check by itself is checked
// before any network I/O: against an address where nothing listens, a bad
// value is exit 2 (not 3, "no master answered") with a message naming it.
func TestBadValuesAreUsageErrorsBeforeAnyCall(t *testing.T) {
	t.Parallel()
	dead := deadAddress(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, c := range []struct {
		args []string
		want string // in stderr
	}{
		// Global flags.
		{[]string{"--address", "nohost", "jobs", "list"}, "--address"},
		{[]string{"--address", "127.0.0.1:99999", "jobs", "list"}, "--address"},
		{[]string{"-o", "xml", "jobs", "list"}, "--output"},
		{[]string{"--timeout", "0s", "jobs", "list"}, "--timeout"},
		{[]string{"--timeout", "soon", "jobs", "list"}, "--timeout"},
		{[]string{"--tls-ca", missing, "--tls-cert", missing, "--tls-key", missing, "jobs", "list"}, "--tls-ca"},
		{[]string{"--tls-cert", missing, "jobs", "list"}, "--tls"},
		// jobs
		{[]string{"jobs", "create-index", "lake.items", "i", "--column", "c", "--type", "BTREE"}, "CATALOG.DB.TABLE"},
		{[]string{"jobs", "create-index", "lake.db.t", " ", "--column", "c", "--type", "BTREE"}, "INDEX"},
		{[]string{"jobs", "create-index", "lake.db.t", "i", "--column", " ", "--type", "BTREE"}, "--column"},
		{[]string{"jobs", "create-index", "lake.db.t", "i", "--column", "c", "--type", "NOPE"}, "--type"},
		{[]string{"jobs", "create-index", "lake.db.t", "i", "--column", "c", "--type", "BTREE", "--property", "novalue"}, "--property"},
		{[]string{"jobs", "create-index", "lake.db.t", "i", "--column", "c", "--type", "BTREE", "--wait", "--timeout-total", "-1s"}, "--timeout-total"},
		{[]string{"jobs", "drop-index", "lake..t", "i"}, "CATALOG.DB.TABLE"},
		{[]string{"jobs", "drop-index", "lake.db.t", "i", "--wait", "--timeout-total", "-1s"}, "--timeout-total"},
		{[]string{"jobs", "optimize", "lake.db"}, "CATALOG.DB.TABLE"},
		{[]string{"jobs", "optimize", "lake.db.t", "--wait", "--timeout-total", "-1s"}, "--timeout-total"},
		{[]string{"config", "set", "lance_index_job_dispatcher_paused", "maybe"}, "true or false"},
		{[]string{"config", "set", "lance_index_job_max_dispatch_per_round", "0"}, "between 1 and"},
		{[]string{"jobs", "list", "--limit", "0"}, "--limit"},
		{[]string{"jobs", "list", "--limit", "5000"}, "--limit"},
		{[]string{"jobs", "list", "--limit", "many"}, "--limit"},
		{[]string{"jobs", "list", "--after", "-1"}, "--after"},
		{[]string{"jobs", "list", "--cursor", "0"}, "--cursor"},
		{[]string{"jobs", "list", "--cursor", "abc"}, "--cursor"},
		{[]string{"jobs", "list", "--after", "3", "--cursor", "4"}, "--cursor"},
		{[]string{"jobs", "list", "--since", "yesterday"}, "--since"},
		{[]string{"jobs", "list", "--since", "-2h"}, "--since"},
		{[]string{"jobs", "list", "--type", "RENAME"}, "--type"},
		{[]string{"jobs", "list", "--index-type", "IVF_SQ"}, "--index-type"},
		{[]string{"jobs", "list", "--state", "SLEEPING"}, "--state"},
		{[]string{"jobs", "list", "--state", "PENDING,refresh:BOGUS"}, "--state"},
		{[]string{"jobs", "list", "--state", "PENDING,"}, "--state"},
		{[]string{"jobs", "list", "--restored", "--state", "PENDING"}, "--state"},
		{[]string{"jobs", "list", "--restored", "--watch", "--interval", "0s"}, "--interval"},
		{[]string{"jobs", "list", "--watch", "--timeout-total", "-1s"}, "--timeout-total"},
		{[]string{"jobs", "show", "abc"}, "job ID"},
		{[]string{"jobs", "show", "0"}, "job ID"},
		{[]string{"jobs", "resolve", "-4", "--force-release", "--comment", "x"}, "-4"}, // read as a flag
		{[]string{"jobs", "resolve", "4", "--force-release", "--comment", "  "}, "--comment"},
		{[]string{"jobs", "cancel", "x"}, "job ID"},
		{[]string{"jobs", "watch", "1", "x"}, "job ID"},
		{[]string{"jobs", "watch", "1", "--interval", "0s"}, "--interval"},
		{[]string{"jobs", "watch", "1", "--timeout-total", "-1s"}, "--timeout-total"},
		{[]string{"jobs", "logs", "x"}, "job ID"},
		{[]string{"jobs", "logs", "1", "--max-bytes", "-1"}, "--max-bytes"},
		// catalogs
		{[]string{"catalogs", "create", "lake", "--root", " "}, "--root"},
		{[]string{"catalogs", "create", " ", "--root", "/data"}, "NAME"},
		{[]string{"catalogs", "create", "lake", "--root", "/data", "--refresh-kind", "kafka"}, "--refresh-kind"},
		{[]string{"catalogs", "create", "lake", "--root", "/data", "--optimize-unindexed-rows", "-1"}, "--optimize-unindexed-rows"},
		{[]string{"catalogs", "create", "lake", "--root", "/data", "--optimize-min-interval-second", "-5"}, "--optimize-min-interval-second"},
		{[]string{"catalogs", "create", "lake", "--root", "/data", "--refresh-kind", "mysql", "--refresh-address", "nohost"}, "--refresh-address"},
		{[]string{"catalogs", "create", "lake", "--root", "/data", "--refresh-kind", "webhook", "--refresh-url", "not a url"}, "--refresh-url"},
		{[]string{"catalogs", "create", "lake", "--root", "relative/path"}, "--root"},
		{[]string{"catalogs", "create", "lake", "--root", "/data", "--credentials", "../etc/passwd"}, "--credentials"},
		{[]string{"catalogs", "create", "lake", "--root", "/data", "--refresh-kind", "mysql", "--refresh-address", "fe:9030",
			"--refresh-credentials", "a/b"}, "--refresh-credentials"},
		{[]string{"catalogs", "update", "lake", "--refresh-kind", "kafka"}, "--refresh-kind"},
		{[]string{"catalogs", "update", "lake", "--root", "s3://user@bucket/x"}, "--root"},
		{[]string{"catalogs", "update", "lake", "--optimize-unindexed-rows", "-1"}, "--optimize-unindexed-rows"},
		{[]string{"catalogs", "remove", " "}, "NAME"},
		{[]string{"catalogs", "show", " "}, "NAME"},
		// backends
		{[]string{"backends", "add", "nohost"}, "HOST:PORT"},
		{[]string{"backends", "add", "10.0.0.1:70000"}, `port must be 1..65535, got "70000"`},
		{[]string{"backends", "show", "nonsense"}, "HOST:PORT"},
		{[]string{"backends", "drain", "0"}, "HOST:PORT"},
		{[]string{"backends", "undrain", "x:y"}, "HOST:PORT"},
		{[]string{"backends", "remove", "-3"}, "-3"},
		// operator
		{[]string{"operator", "raft", "transfer-leader", "--to", " "}, "--to"},
		{[]string{"operator", "raft", "add-voter", " ", "10.0.0.4:7202"}, "ID"},
		{[]string{"operator", "raft", "add-voter", "m4", "nohost"}, "RAFT_ADDRESS"},
		{[]string{"operator", "raft", "add-voter", "m4", "10.0.0.4:7202", "--rpc-address", "10.0.0.4"}, "--rpc-address"},
		{[]string{"operator", "raft", "remove-peer", " "}, "ID"},
		{[]string{"operator", "raft", "promote", " "}, "ID"},
		{[]string{"operator", "snapshot", "restore", missing}, missing},
		{[]string{"operator", "snapshot", "inspect", missing}, missing},
		{[]string{"operator", "snapshot", "save", filepath.Join(missing, "x.snap")}, "x.snap"},
		// datasets
		{[]string{"datasets", "inspect", "lake.db"}, "CATALOG.DB.TABLE"},
	} {
		args := c.args
		if args[0] != "--address" {
			args = append([]string{"--address", dead}, args...)
		}
		_, errOut, code := runCLI(t, map[string]string{"USER": "alice"}, args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %q", strings.Join(c.args, " "), code, strings.TrimSpace(errOut), c.want)
		}
	}
}
