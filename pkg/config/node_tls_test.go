package config

import (
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/rpc"
)

func TestNodeTLSSection(t *testing.T) {
	n, err := ParseNode([]byte(exampleNode + `
tls:
  ca: /etc/lancemaster/tls/ca.pem
  cert: /etc/lancemaster/tls/master.pem
  key: /etc/lancemaster/tls/master-key.pem
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	want := rpc.TLSFiles{CA: "/etc/lancemaster/tls/ca.pem", Cert: "/etc/lancemaster/tls/master.pem", Key: "/etc/lancemaster/tls/master-key.pem"}
	if n.TLS != want || !n.TLS.Enabled() {
		t.Fatalf("tls = %+v", n.TLS)
	}

	n, err = ParseNode([]byte(exampleNode + "tls: {ca: /ca.pem}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Validate(); err == nil || !strings.Contains(err.Error(), "missing: cert, key") {
		t.Fatalf("partial tls: %v", err)
	}
	if _, err := ParseNode([]byte(exampleNode + "tls: {ca: /ca.pem, certificate: /x}\n")); err == nil {
		t.Fatal("an unknown tls key was accepted")
	}
	n, _ = ParseNode([]byte(exampleNode))
	if n.TLS.Enabled() {
		t.Fatal("tls on without a tls section")
	}
}
