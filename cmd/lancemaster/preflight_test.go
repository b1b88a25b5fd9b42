package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/lancemaster/lancemaster/pkg/certs"
)

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// config validate checks a file as a start would, without a master: a
// good file passes, a bad one lists every problem (exit 2), a certificate
// of the wrong role is refused, and nothing is created.
func TestConfigValidateMasterFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data-never-made")
	good := writeFile(t, filepath.Join(dir, "m1.yaml"), fmt.Sprintf(`node_id: m1
data_dir: %s
peers:
  - {id: m1, raft_address: "127.0.0.1:17202", rpc_address: "127.0.0.1:17201"}
`, data))
	out := mustOK(t)(runCLI(t, nil, "config", "validate", good))
	if out != "master configuration "+good+" is valid (node m1, 1 peers)\n" {
		t.Errorf("stdout = %q", out)
	}
	bad := writeFile(t, filepath.Join(dir, "bad.yaml"), "node_id: m1\nraft_bnd: x\npeers: 3\n")
	_, errOut, code := runCLI(t, nil, "config", "validate", bad)
	if code != exitUsage || !strings.Contains(errOut, "Error: 2 problems:\n") ||
		!strings.Contains(errOut, `unknown key "raft_bnd" (did you mean "raft_bind"?)`) {
		t.Errorf("bad file: exit %d, stderr:\n%s", code, errOut)
	}
	pki := devPKI(t)
	ca, cert, key := certs.DevFiles(pki, certs.RoleBackend)
	wrongRole := writeFile(t, filepath.Join(dir, "tls.yaml"), fmt.Sprintf(`node_id: m1
data_dir: %s
peers:
  - {id: m1, raft_address: "127.0.0.1:17202", rpc_address: "127.0.0.1:17201"}
tls: {ca: %s, cert: %s, key: %s}
`, data, ca, cert, key))
	if _, errOut, code := runCLI(t, nil, "config", "validate", wrongRole); code != exitUsage || !strings.Contains(errOut, "backend") {
		t.Errorf("a backend certificate for a master: exit %d, stderr:\n%s", code, errOut)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("validate made the data dir: %v", err)
	}
}

// serve --dry-run also checks the host: an address in use fails (exit 2),
// a free one passes, and the data dir is still not made.
func TestServeDryRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	data := filepath.Join(dir, "data")
	free := func() string { return testkit.Addr(testkit.Ports(t, 1)[0]) }
	cfg := func(rpcAddr string) string {
		return writeFile(t, filepath.Join(dir, "m.yaml"), fmt.Sprintf(`node_id: m1
data_dir: %s
peers:
  - {id: m1, raft_address: "%s", rpc_address: "%s"}
`, data, free(), rpcAddr))
	}
	if _, errOut, code := runCLI(t, nil, "serve", "--dry-run", "--config", cfg(busy.Addr().String())); code != exitUsage ||
		!strings.Contains(errOut, "rpc_bind "+busy.Addr().String()) {
		t.Errorf("busy rpc address: exit %d, stderr:\n%s", code, errOut)
	}
	out := mustOK(t)(runCLI(t, nil, "serve", "--dry-run", "--config", cfg(free())))
	if !strings.HasPrefix(out, "master m1: ready to start") {
		t.Errorf("stdout = %q", out)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("dry run made the data dir: %v", err)
	}
}
