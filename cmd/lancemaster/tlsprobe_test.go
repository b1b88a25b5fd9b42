package main

import (
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/certs"
)

// A TLS / plaintext mismatch says so (exit 2), instead of "lost the master
// connection: EOF" (exit 3).
func TestTLSMismatchIsSaid(t *testing.T) {
	t.Parallel()
	pki := devPKI(t)
	tlsAddr := serveTLS(t, pki, &fakeMaster{})
	_, errOut, code := runCLI(t, nil, "--address", tlsAddr, "jobs", "list")
	if code != exitUsage || !strings.Contains(errOut, "requires TLS") || strings.Contains(errOut, "EOF") {
		t.Errorf("plaintext client, TLS master: exit %d, stderr %q", code, errOut)
	}
	plain := serve(t, &fakeMaster{})
	_, errOut, code = runCLI(t, nil, append([]string{"--address", plain}, append(tlsArgs(pki, certs.RoleOperator), "jobs", "list")...)...)
	if code != exitUsage || !strings.Contains(errOut, "does not speak TLS") {
		t.Errorf("TLS client, plaintext master: exit %d, stderr %q", code, errOut)
	}
}

// A malformed --address is the command line's mistake: exit 2, nothing sent.
func TestMalformedAddressIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"notanaddress", "127.0.0.1:99999", "127.0.0.1:7201,:0"} {
		if _, errOut, code := runCLI(t, nil, "--address", a, "jobs", "list"); code != exitUsage || !strings.Contains(errOut, "--address") {
			t.Errorf("--address %q: exit %d, stderr %q", a, code, errOut)
		}
	}
}

// --tls-server-name checks the master's certificate against that name
// instead of the dialled host: a name the certificate carries works, one it
// does not is refused in the handshake.
func TestTLSServerName(t *testing.T) {
	t.Parallel()
	pki := devPKI(t)
	addr := serveTLS(t, pki, &fakeMaster{})
	args := func(name string) []string {
		return append([]string{"--address", addr, "--tls-server-name", name}, append(tlsArgs(pki, certs.RoleOperator), "jobs", "list")...)
	}
	mustOK(t)(runCLI(t, nil, args("localhost")...))
	if _, errOut, code := runCLI(t, nil, args("not-a-master.example")...); code == exitOK || !strings.Contains(errOut, "not-a-master.example") {
		t.Errorf("a name the certificate lacks: exit %d, stderr %q", code, errOut)
	}
}
