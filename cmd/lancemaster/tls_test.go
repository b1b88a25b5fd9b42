package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// devPKI runs `certs init` into a temporary directory and returns it.
func devPKI(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	out := mustOK(t)(runCLI(t, nil, "certs", "init", "--dir", dir, "--hosts", "127.0.0.1,localhost"))
	if !strings.Contains(out, "made a new development CA") || !strings.Contains(out, "master-key.pem") {
		t.Fatalf("certs init printed:\n%s", out)
	}
	return dir
}

// serveTLS runs the fake master h with a master certificate and the
// masters' authorization.
func serveTLS(t *testing.T, dir string, h adminapi.LanceMasterService) string {
	t.Helper()
	ca, cert, key := certs.DevFiles(dir, certs.RoleMaster)
	c, err := rpc.TLSFiles{CA: ca, Cert: cert, Key: key}.Load(certs.RoleMaster, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rpc.DefaultConfig()
	cfg.Certs = c
	srv, err := rpc.NewServer("127.0.0.1:0", adminapi.NewLanceMasterServiceProcessor(h), cfg, nil, rpc.WithPolicy(rpc.MasterPolicy()))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv.Addr().String()
}

func tlsArgs(dir string, role certs.Role) []string {
	ca, cert, key := certs.DevFiles(dir, role)
	return []string{"--tls-ca", ca, "--tls-cert", cert, "--tls-key", key}
}

func TestCertsInitRotatesWithTheSameCA(t *testing.T) {
	t.Parallel()
	dir := devPKI(t)
	info, err := os.Stat(filepath.Join(dir, certs.KeyFile(certs.RoleOperator)))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("operator key: %v %v", info.Mode(), err)
	}
	out := mustOK(t)(runCLI(t, nil, "certs", "init", "--dir", dir))
	if !strings.Contains(out, "reused the CA") {
		t.Fatalf("second certs init:\n%s", out)
	}
	if _, _, code := runCLI(t, nil, "certs", "init"); code != exitUsage {
		t.Fatalf("certs init without --dir: exit %d", code)
	}
}

func TestCLIWithMutualTLS(t *testing.T) {
	t.Parallel()
	dir := devPKI(t)
	f := &fakeMaster{job: &adminapi.TJobView{JobID: 1}}
	addr := serveTLS(t, dir, f)

	// Flags.
	mustOK(t)(runCLI(t, nil, append([]string{"--address", addr}, append(tlsArgs(dir, certs.RoleOperator), "jobs", "show", "1")...)...))
	// The environment.
	ca, cert, key := certs.DevFiles(dir, certs.RoleOperator)
	env := map[string]string{envAddress: addr, envTLSCA: ca, envTLSCert: cert, envTLSKey: key}
	mustOK(t)(runCLI(t, env, "jobs", "cancel", "1"))

	// A backend's certificate may not change the cluster: a typed refusal.
	_, stderr, code := runCLI(t, nil, append([]string{"--address", addr}, append(tlsArgs(dir, certs.RoleBackend), "jobs", "cancel", "1")...)...)
	if code != exitError || !strings.Contains(stderr, "Error: PERMISSION_DENIED: permission denied: a backend certificate may not call") {
		t.Fatalf("backend certificate: exit %d, stderr %q", code, stderr)
	}
	// No certificate: the CLI says the master requires TLS (its
	// configuration's mistake, exit 2; nothing reached the handler).
	if _, stderr, code := runCLI(t, nil, "--address", addr, "--timeout", "5s", "jobs", "show", "1"); code != exitUsage ||
		!strings.Contains(stderr, "requires TLS") {
		t.Fatalf("plaintext CLI to a TLS master: exit %d, stderr %q", code, stderr)
	}
	// Half a configuration is a usage error, before anything is sent.
	_, stderr, code = runCLI(t, nil, "--address", addr, "--tls-ca", ca, "jobs", "show", "1")
	if code != exitUsage || !strings.Contains(stderr, "missing: cert, key") {
		t.Fatalf("--tls-ca alone: exit %d, stderr %q", code, stderr)
	}
	var methods []string
	for _, c := range f.recordedCalls() {
		methods = append(methods, c.method)
	}
	if strings.Join(methods, ",") != "ShowJob,CancelJob" {
		t.Fatalf("the master served %v; only the operator's two calls may reach it", methods)
	}
}

// serve and backend take --tls-* from their command line only: an operator's
// LANCEMASTER_TLS_* in the shell must not become a daemon's certificate.
func TestDaemonsIgnoreTheTLSEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{envTLSCA: "/env/ca.pem", envTLSCert: "/env/operator.pem", envTLSKey: "/env/operator-key.pem"}
	for _, name := range []string{"serve", "backend"} {
		root := newRootCmd(&globals{}, func(k string) string { return env[k] })
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags([]string{"--tls-ca", "/flag/ca.pem"}); err != nil {
			t.Fatal(err)
		}
		ca, cert, key := "/file/ca.pem", "/file/master.pem", "/file/master-key.pem"
		daemonTLS(cmd, &ca, &cert, &key)
		if ca != "/flag/ca.pem" || cert != "/file/master.pem" || key != "/file/master-key.pem" {
			t.Fatalf("%s: tls files %s %s %s", name, ca, cert, key)
		}
	}
}
