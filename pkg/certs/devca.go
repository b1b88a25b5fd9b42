package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Development CA defaults (`lancemaster certs init`).
const (
	// DefaultCAValidity is the development CA's lifetime.
	DefaultCAValidity = 365 * 24 * time.Hour
	// DefaultValidity is a development leaf certificate's lifetime: short,
	// so that rotation is exercised rather than forgotten.
	DefaultValidity = 30 * 24 * time.Hour
	// backdate covers clock skew between the hosts.
	backdate = 5 * time.Minute
)

// CA is a certificate authority that can issue leaf certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// CertPEM is Cert in PEM, what peers trust (ca.pem).
	CertPEM []byte
}

// NewCA makes a self-signed ECDSA P-256 CA valid for validity from now. It
// may sign leaf certificates only (path length 0).
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"lancemaster"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// LoadCA reads a CA certificate and its key (PEM; the key PKCS#8, SEC 1 or
// as written by WriteDevCerts).
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("certs: read CA certificate: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("certs: %s: no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: %s: %w", certFile, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("certs: %s is not a CA certificate", certFile)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("certs: read CA key: %w", err)
	}
	key, err := parseECKey(keyPEM)
	if err != nil {
		// Never echo key material: the error names the file only.
		return nil, fmt.Errorf("certs: %s: %w", keyFile, err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("certs: %s does not match %s", keyFile, certFile)
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})}, nil
}

func parseECKey(data []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if ek, ok := k.(*ecdsa.PrivateKey); ok {
			return ek, nil
		}
		return nil, errors.New("the private key is not ECDSA")
	}
	k, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("unreadable private key (want PKCS#8 or SEC 1 ECDSA)")
	}
	return k, nil
}

// Leaf describes a certificate to issue.
type Leaf struct {
	// Role is the URI SAN the certificate carries; "" issues a certificate
	// without a role (tests: such a peer may call nothing).
	Role Role
	// CommonName is informational (logs); default "lancemaster <role>".
	CommonName string
	// Hosts are the DNS names and IP addresses peers dial the holder at
	// (SANs). A server certificate needs them; an operator's needs none.
	Hosts []string
	// Server adds the server-auth key usage (masters and backends serve);
	// every leaf has client auth.
	Server bool
	// Validity from now; zero means DefaultValidity.
	Validity time.Duration
}

// ForRole is the Leaf a development setup issues for role: masters and
// backends serve and dial (server and client auth, hosts as SANs),
// operators only dial (client auth, no SANs).
func ForRole(r Role, hosts []string, validity time.Duration) Leaf {
	l := Leaf{Role: r, Validity: validity}
	if r != RoleOperator {
		l.Server, l.Hosts = true, hosts
	}
	return l
}

// Issue signs a new ECDSA P-256 key pair for l and returns the certificate
// and the key in PEM (the key PKCS#8).
func (ca *CA) Issue(l Leaf) (certPEM, keyPEM []byte, err error) {
	if l.Role != "" && !l.Role.Valid() {
		return nil, nil, fmt.Errorf("certs: unknown role %q", l.Role)
	}
	validity := l.Validity
	if validity <= 0 {
		validity = DefaultValidity
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	cn := l.CommonName
	if cn == "" {
		cn = "lancemaster " + l.Role.String()
	}
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter // a leaf cannot outlive its CA
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"lancemaster"}},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if l.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	for _, h := range l.Hosts {
		h = strings.TrimSpace(h)
		switch ip := net.ParseIP(h); {
		case h == "":
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if l.Role != "" {
		tmpl.URIs = append(tmpl.URIs, l.Role.URI())
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: sign %s certificate: %w", l.Role, err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), nil
}

func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // never 0
}

// File names WriteDevCerts uses in its directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// CertFile and KeyFile are a role's certificate and key in a WriteDevCerts
// directory: master.pem and master-key.pem, and so on.
func CertFile(r Role) string { return string(r) + ".pem" }
func KeyFile(r Role) string  { return string(r) + "-key.pem" }

// DevFiles returns the paths of the CA, role's certificate and its key in a
// WriteDevCerts directory (the values of a `tls:` section).
func DevFiles(dir string, r Role) (ca, cert, key string) {
	return filepath.Join(dir, CAFile), filepath.Join(dir, CertFile(r)), filepath.Join(dir, KeyFile(r))
}

// DevOptions configure WriteDevCerts.
type DevOptions struct {
	// Hosts are the SANs of the master and backend certificates.
	Hosts []string
	// Validity of the leaf certificates (DefaultValidity when zero) and of a
	// new CA (DefaultCAValidity when zero).
	Validity, CAValidity time.Duration
	// NewCA makes a new CA even when the directory holds one.
	NewCA bool
}

// DevResult says what WriteDevCerts did.
type DevResult struct {
	Dir      string
	CAReused bool
	CA       *x509.Certificate
	Files    []string // every file written, in order
}

// WriteDevCerts writes a development CA (unless dir already holds one and
// o.NewCA is false: it is then reused, which rotates the leaf certificates)
// and one certificate per role into dir (created 0700). Keys are written
// 0600, certificates 0644, each through a temporary file renamed into place,
// so a process that re-reads them sees the old file or the new one.
//
// The CA key stays in dir: fine for a laptop, never for production, where
// the CA key belongs offline (docs/operations.md).
func WriteDevCerts(dir string, o DevOptions) (*DevResult, error) {
	if len(o.Hosts) == 0 {
		return nil, errors.New("certs: no hosts: the master and backend certificates need at least one DNS name or IP")
	}
	if o.CAValidity <= 0 {
		o.CAValidity = DefaultCAValidity
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	res := &DevResult{Dir: dir}
	caCert, caKey := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	var ca *CA
	if !o.NewCA {
		_, errC := os.Stat(caCert)
		_, errK := os.Stat(caKey)
		switch {
		case errC == nil && errK == nil:
			var err error
			if ca, err = LoadCA(caCert, caKey); err != nil {
				return nil, err
			}
			res.CAReused = true
		case errC == nil || errK == nil:
			return nil, fmt.Errorf("certs: %s holds only one of %s and %s: remove it or pass a new CA option", dir, CAFile, CAKeyFile)
		}
	}
	if ca == nil {
		var err error
		if ca, err = NewCA("lancemaster development CA", o.CAValidity); err != nil {
			return nil, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
		if err != nil {
			return nil, err
		}
		if err := writeFileAtomic(caKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return nil, err
		}
		if err := writeFileAtomic(caCert, ca.CertPEM, 0o644); err != nil {
			return nil, err
		}
		res.Files = append(res.Files, caCert, caKey)
	}
	res.CA = ca.Cert
	for _, r := range Roles {
		certPEM, keyPEM, err := ca.Issue(ForRole(r, o.Hosts, o.Validity))
		if err != nil {
			return nil, err
		}
		cf, kf := filepath.Join(dir, CertFile(r)), filepath.Join(dir, KeyFile(r))
		// The key first: a reader that sees the new key with the old
		// certificate refuses the pair and keeps what it has.
		if err := writeFileAtomic(kf, keyPEM, 0o600); err != nil {
			return nil, err
		}
		if err := writeFileAtomic(cf, certPEM, 0o644); err != nil {
			return nil, err
		}
		res.Files = append(res.Files, cf, kf)
	}
	return res, nil
}

// writeFileAtomic writes data to a temporary file in path's directory with
// mode perm, syncs it and renames it over path.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("certs: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("certs: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}
