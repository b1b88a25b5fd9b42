package rpc

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/lancemaster/lancemaster/pkg/certs"
)

// testPKI is a CA and certificate files per role in a temporary directory.
type testPKI struct {
	t   *testing.T
	dir string
	ca  *certs.CA
	// mtime is bumped for every file written, so a rewrite within one
	// file-system timestamp tick is still seen as a change.
	mtime time.Time
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, err := certs.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{t: t, dir: t.TempDir(), ca: ca, mtime: time.Now().Add(-time.Hour)}
	p.write("ca.pem", ca.CertPEM)
	return p
}

func (p *testPKI) write(name string, data []byte) string {
	p.t.Helper()
	path := filepath.Join(p.dir, name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		p.t.Fatal(err)
	}
	p.mtime = p.mtime.Add(time.Second)
	if err := os.Chtimes(tmp, p.mtime, p.mtime); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// issue writes a certificate and key for leaf as <name>.pem and
// <name>-key.pem and returns the files (with this PKI's CA).
func (p *testPKI) issue(name string, leaf certs.Leaf) TLSFiles {
	p.t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(leaf)
	if err != nil {
		p.t.Fatal(err)
	}
	return TLSFiles{
		CA:   filepath.Join(p.dir, "ca.pem"),
		Key:  p.write(name+"-key.pem", keyPEM),
		Cert: p.write(name+".pem", certPEM),
	}
}

// role issues a loopback certificate for r, named after it.
func (p *testPKI) role(r certs.Role) TLSFiles {
	return p.issue(string(r), certs.ForRole(r, []string{"127.0.0.1", "localhost"}, time.Hour))
}

// config loads files into a Config.
func (p *testPKI) config(f TLSFiles) Config {
	p.t.Helper()
	c, err := f.Load("", zaptest.NewLogger(p.t))
	if err != nil {
		p.t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Certs = c
	return cfg
}

func (p *testPKI) roleConfig(r certs.Role) Config { return p.config(p.role(r)) }
