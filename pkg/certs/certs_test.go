package certs

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRoleOfIsStrict(t *testing.T) {
	u := func(s string) *url.URL {
		v, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		uris []*url.URL
		want Role
		err  bool
	}{
		{"master", []*url.URL{RoleMaster.URI()}, RoleMaster, false},
		{"operator among foreign URIs", []*url.URL{u("spiffe://other/role/master"), RoleOperator.URI(), u("https://example.com")}, RoleOperator, false},
		{"none", nil, "", true},
		{"foreign only", []*url.URL{u("spiffe://other/role/master")}, "", true},
		{"two roles", []*url.URL{RoleMaster.URI(), RoleOperator.URI()}, "", true},
		{"same role twice", []*url.URL{RoleMaster.URI(), RoleMaster.URI()}, "", true},
		{"unknown role", []*url.URL{u("spiffe://lancemaster/role/admin")}, "", true},
		{"trailing slash", []*url.URL{u("spiffe://lancemaster/role/master/")}, "", true},
		{"query", []*url.URL{u("spiffe://lancemaster/role/master?x=1")}, "", true},
		{"port", []*url.URL{u("spiffe://lancemaster:1/role/master")}, "", true},
		{"upper-case domain", []*url.URL{u("spiffe://LANCEMASTER/role/master")}, "", true},
		{"escaped", []*url.URL{u("spiffe://lancemaster/role/mast%65r")}, "", true},
		{"other path in our domain", []*url.URL{u("spiffe://lancemaster/ns/x"), RoleMaster.URI()}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RoleOf(&x509.Certificate{URIs: tc.uris})
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("RoleOf = %q, %v; want %q, error %v", got, err, tc.want, tc.err)
			}
		})
	}
	if _, err := RoleOf(&x509.Certificate{}); !errors.Is(err, ErrNoRole) {
		t.Fatalf("no URI: %v, want ErrNoRole", err)
	}
}

func TestIssueRoles(t *testing.T) {
	ca, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, r := range Roles {
		certPEM, keyPEM, err := ca.Issue(ForRole(r, []string{"127.0.0.1", "localhost", "::1"}, 2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		c := parseCert(t, certPEM)
		if got, err := RoleOf(c); err != nil || got != r {
			t.Fatalf("%s: RoleOf = %q, %v", r, got, err)
		}
		if c.NotAfter.After(ca.Cert.NotAfter) {
			t.Errorf("%s outlives its CA", r)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: not a client certificate of the CA: %v", r, err)
		}
		_, serverErr := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"})
		if (serverErr == nil) != (r != RoleOperator) {
			t.Errorf("%s: server verification for 127.0.0.1: %v", r, serverErr)
		}
		if r == RoleOperator && (len(c.IPAddresses)+len(c.DNSNames)) != 0 {
			t.Errorf("operator certificate has host SANs")
		}
		if r != RoleOperator && (len(c.IPAddresses) != 2 || !slices.Equal(c.DNSNames, []string{"localhost"})) {
			t.Errorf("%s SANs: %v %v", r, c.IPAddresses, c.DNSNames)
		}
		if _, err := parseECKey(keyPEM); err != nil {
			t.Errorf("%s key: %v", r, err)
		}
	}
}

func TestWriteDevCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	res, err := WriteDevCerts(dir, DevOptions{Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.CAReused || len(res.Files) != 2+2*len(Roles) {
		t.Fatalf("first run: %+v", res)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode: %v %v", info.Mode(), err)
	}
	for _, f := range append([]string{CAKeyFile}, KeyFile(RoleMaster), KeyFile(RoleBackend), KeyFile(RoleOperator)) {
		info, err := os.Stat(filepath.Join(dir, f))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", f, info.Mode(), err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, CertFile(RoleMaster)))
	if err != nil {
		t.Fatal(err)
	}
	first := parseCert(t, data)
	if d := time.Until(first.NotAfter); d > DefaultValidity || d < DefaultValidity-time.Hour {
		t.Errorf("leaf validity %v, want about %v", d, DefaultValidity)
	}

	// A second run keeps the CA and re-issues the leaves: a rotation.
	res2, err := WriteDevCerts(dir, DevOptions{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res2.CAReused || !res2.CA.Equal(res.CA) {
		t.Fatalf("second run did not reuse the CA: %+v", res2)
	}
	data, _ = os.ReadFile(filepath.Join(dir, CertFile(RoleMaster)))
	if second := parseCert(t, data); second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("the master certificate was not re-issued")
	}
	res3, err := WriteDevCerts(dir, DevOptions{Hosts: []string{"127.0.0.1"}, NewCA: true})
	if err != nil || res3.CAReused || res3.CA.Equal(res.CA) {
		t.Fatalf("NewCA: %+v, %v", res3, err)
	}

	// Half a CA is an error, not a silent new CA.
	if err := os.Remove(filepath.Join(dir, CAKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteDevCerts(dir, DevOptions{Hosts: []string{"127.0.0.1"}}); err == nil {
		t.Fatal("a CA certificate without its key was accepted")
	}
	if _, err := WriteDevCerts(t.TempDir(), DevOptions{}); err == nil {
		t.Fatal("no hosts accepted")
	}
}
