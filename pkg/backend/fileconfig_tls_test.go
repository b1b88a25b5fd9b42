package backend

import (
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/rpc"
)

func TestFileConfigTLS(t *testing.T) {
	const base = "listen: 127.0.0.1:7401\ndata_dir: /d\nmasters: [127.0.0.1:7201]\n"
	c, err := ParseFileConfig([]byte(base + "tls: {ca: /t/ca.pem, cert: /t/backend.pem, key: /t/backend-key.pem}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.TLS != (rpc.TLSFiles{CA: "/t/ca.pem", Cert: "/t/backend.pem", Key: "/t/backend-key.pem"}) {
		t.Fatalf("tls = %+v", c.TLS)
	}
	c, err = ParseFileConfig([]byte(base + "tls: {cert: /t/backend.pem}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "missing: ca, key") {
		t.Fatalf("partial tls: %v", err)
	}
}
