package rpc

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lancemaster/lancemaster/pkg/certs"
)

// TLSFiles names the PEM files of mutual TLS: the CA every peer's
// certificate must chain to, this process's certificate, and its private
// key. Set all three, or none (plaintext). The node file's and the backend
// file's `tls:` section (ca, cert, key) and the CLI's --tls-ca, --tls-cert
// and --tls-key are this.
type TLSFiles struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Enabled reports whether any file is named.
func (f TLSFiles) Enabled() bool { return f != TLSFiles{} }

// Validate checks that the files are named all together or not at all. It
// does not read them: Load does.
func (f TLSFiles) Validate() error {
	if !f.Enabled() {
		return nil
	}
	var missing []string
	for _, v := range []struct{ name, path string }{{"ca", f.CA}, {"cert", f.Cert}, {"key", f.Key}} {
		if strings.TrimSpace(v.path) == "" {
			missing = append(missing, v.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("tls: set ca, cert and key together (missing: %s)", strings.Join(missing, ", "))
	}
	return nil
}

// Load reads the files once, checks them, and returns the Certs that
// serve them to TLS from then on, re-reading them when they change.
//
// role, when not empty, is the role this process's own certificate must
// carry (a master's must say master); a rotated certificate of another role
// is refused and the previous one kept. A nil log discards logs.
func (f TLSFiles) Load(role certs.Role, log *zap.Logger) (*Certs, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if !f.Enabled() {
		return nil, errors.New("tls: no certificate files configured")
	}
	if log == nil {
		log = zap.NewNop()
	}
	c := &Certs{files: f, role: role, log: log}
	stamp, err := f.stamp()
	if err != nil {
		return nil, err
	}
	st, err := c.load(stamp)
	if err != nil {
		return nil, err
	}
	c.cur = st
	if info, err := os.Stat(f.Key); err == nil && info.Mode().Perm()&0o077 != 0 {
		log.Warn("tls: the private key file is readable by group or others; make it 0600",
			zap.String("key", f.Key), zap.Stringer("mode", info.Mode().Perm()))
	}
	log.Info("tls: certificates loaded", st.fields(f)...)
	st.warnExpiry(log)
	return c, nil
}

// expiryWarning is how close to its expiry a loaded certificate is logged
// at Warn.
const expiryWarning = 7 * 24 * time.Hour

func (st *certState) warnExpiry(log *zap.Logger) {
	if left := time.Until(st.cert.Leaf.NotAfter); left < expiryWarning {
		log.Warn("tls: the certificate expires soon (or has expired): rotate it", zap.Duration("left", left.Round(time.Second)),
			zap.Time("not_after", st.cert.Leaf.NotAfter), zap.String("subject", st.cert.Leaf.Subject.CommonName))
	}
}

// Certs serves the certificates of TLSFiles to crypto/tls, TLS 1.3 only,
// mutual authentication always. Each handshake asks Certs for the current
// certificate, key and CA; Certs stats the three files and, when one's
// modification time or size changed, reads them again. A new set that does
// not load (a half-written file, a key that does not match the certificate,
// a certificate of the wrong role) is logged once and ignored: the last good
// set stays in use, so rotation is: write the new files (atomically, by
// rename), and new connections use them. Connections already open keep the
// certificates they were made with.
//
// Concurrency: safe for concurrent use.
type Certs struct {
	files TLSFiles
	role  certs.Role
	log   *zap.Logger

	mu     sync.Mutex
	cur    *certState
	failed fileStamp // the stamp of the last set that did not load
	// statFailed: a file could not be stat'ed (logged once until it can).
	statFailed bool
}

// certState is one loaded set of files.
type certState struct {
	stamp fileStamp
	cert  tls.Certificate // Leaf set
	pool  *x509.CertPool
	ca    []*x509.Certificate
	role  certs.Role // the certificate's own role; "" when it has none
}

// fileStamp identifies the versions of the three files.
type fileStamp [3]struct {
	mod  int64
	size int64
}

func (f TLSFiles) stamp() (fileStamp, error) {
	var s fileStamp
	for i, p := range []string{f.CA, f.Cert, f.Key} {
		info, err := os.Stat(p)
		if err != nil {
			return s, fmt.Errorf("tls: %w", err)
		}
		s[i].mod, s[i].size = info.ModTime().UnixNano(), info.Size()
	}
	return s, nil
}

// current returns the certificates to use now: the last good set, replaced
// first by the files' new versions when they changed and load.
func (c *Certs) current() *certState {
	stamp, err := c.files.stamp()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		// A file is missing, perhaps mid-rotation: keep the last good set.
		if !c.statFailed {
			c.statFailed = true
			c.log.Warn("tls: cannot stat the certificate files; keeping the certificates in use", zap.Error(err))
		}
		return c.cur
	}
	c.statFailed = false
	if stamp == c.cur.stamp || stamp == c.failed {
		return c.cur
	}
	st, err := c.load(stamp)
	if err != nil {
		c.failed = stamp
		c.log.Warn("tls: the changed certificate files do not load; keeping the certificates in use", zap.Error(err))
		return c.cur
	}
	c.cur, c.failed = st, fileStamp{}
	c.log.Info("tls: certificates reloaded", st.fields(c.files)...)
	st.warnExpiry(c.log)
	return st
}

// load reads and checks the three files. Errors name files, never contents.
func (c *Certs) load(stamp fileStamp) (*certState, error) {
	f := c.files
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("tls: read CA: %w", err)
	}
	var cas []*x509.Certificate
	for rest := caPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		ca, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("tls: CA file %s: %w", f.CA, err)
		}
		cas = append(cas, ca)
	}
	if len(cas) == 0 {
		return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", f.CA)
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return nil, fmt.Errorf("tls: read certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: read key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	clear(keyPEM)
	if err != nil {
		// crypto/tls's messages describe the problem, not the bytes.
		return nil, fmt.Errorf("tls: certificate %s and key %s: %w", f.Cert, f.Key, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: certificate %s: %w", f.Cert, err)
		}
		pair.Leaf = leaf
	}
	// The certificate must chain to the CA we trust peers by: a mismatch
	// (rotated CA, forgotten certificate) would otherwise only show as
	// every peer refusing us.
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("tls: certificate %s does not chain to the CA %s: %w", f.Cert, f.CA, err)
	}
	role, rerr := certs.RoleOf(leaf)
	if c.role != "" {
		if rerr != nil {
			return nil, fmt.Errorf("tls: certificate %s: %w; this process needs role %s", f.Cert, rerr, c.role)
		}
		if role != c.role {
			return nil, fmt.Errorf("tls: certificate %s has role %s; this process needs role %s", f.Cert, role, c.role)
		}
	}
	return &certState{stamp: stamp, cert: pair, pool: pool, ca: cas, role: role}, nil
}

// fields describes a loaded set for a log line: names, serials and dates,
// never key material.
func (st *certState) fields(f TLSFiles) []zap.Field {
	l := st.cert.Leaf
	return []zap.Field{
		zap.String("cert", f.Cert), zap.String("ca", f.CA),
		zap.Stringer("role", st.role), zap.String("subject", l.Subject.CommonName),
		zap.String("serial", l.SerialNumber.Text(16)), zap.Time("not_after", l.NotAfter),
		zap.Int("ca_certificates", len(st.ca)),
	}
}

// Role is the role of this process's current certificate ("" when none).
func (c *Certs) Role() certs.Role { return c.current().role }

// Leaf returns this process's current certificate.
func (c *Certs) Leaf() *x509.Certificate { return c.current().cert.Leaf }

// ServerConfig returns the *tls.Config of a listener: TLS 1.3, this
// process's certificate, client certificates required and verified against
// the CA. Each handshake takes the current files (GetConfigForClient). With
// peerRoles, a client whose certificate carries none of them is refused
// during the handshake (Raft accepts masters only); without, any client
// certificate from the CA is accepted and authorization is per method
// (authz.go).
func (c *Certs) ServerConfig(peerRoles ...certs.Role) *tls.Config {
	peerRoles = slices.Clone(peerRoles)
	st := c.current()
	cfg := st.serverConfig(peerRoles)
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return c.current().serverConfig(peerRoles), nil
	}
	return cfg
}

func (st *certState) serverConfig(peerRoles []certs.Role) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{st.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    st.pool,
		// Every connection presents its certificate: the role always comes
		// from a handshake made with the files of now.
		SessionTicketsDisabled: true,
		VerifyConnection:       requirePeerRole(peerRoles),
	}
}

// ClientConfig returns the *tls.Config to dial addr (host:port) with: TLS
// 1.3, this process's certificate, the server verified against the current
// CA and addr's host (a DNS name or an IP address, matched against the
// certificate's SANs). With serverRoles, a server whose certificate carries
// none of them is refused during the handshake, before any request byte.
// Make one per connection: it holds the files of now.
func (c *Certs) ClientConfig(addr string, serverRoles ...certs.Role) *tls.Config {
	st := c.current()
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    st.pool,
		ServerName: hostOf(addr),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &st.cert, nil
		},
		VerifyConnection: requirePeerRole(slices.Clone(serverRoles)),
	}
}

// requirePeerRole checks the role of the peer's verified certificate; nil
// when any role will do.
func requirePeerRole(roles []certs.Role) func(tls.ConnectionState) error {
	if len(roles) == 0 {
		return nil
	}
	return func(cs tls.ConnectionState) error {
		leaf := verifiedLeaf(cs)
		if leaf == nil {
			return errors.New("rpc: the peer's certificate was not verified")
		}
		r, err := certs.RoleOf(leaf)
		if err != nil {
			return fmt.Errorf("rpc: the peer's certificate: %w", err)
		}
		if !slices.Contains(roles, r) {
			return fmt.Errorf("rpc: the peer's certificate has role %s; only %s may connect here", r, joinRoles(roles))
		}
		return nil
	}
}

func verifiedLeaf(cs tls.ConnectionState) *x509.Certificate {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	return cs.VerifiedChains[0][0]
}

func joinRoles(rs []certs.Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.String()
	}
	return strings.Join(s, " or ")
}

// hostOf is addr's host, without brackets; addr itself when it has no port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return strings.Trim(addr, "[]")
}

// TLSEnabled reports whether c's connections use TLS (Certs or TLS set).
func (c Config) TLSEnabled() bool { return c.Certs != nil || c.TLS != nil }

// serverTLS is the listener's TLS config; nil for plaintext.
func (c Config) serverTLS() *tls.Config {
	if c.Certs != nil {
		return c.Certs.ServerConfig()
	}
	return c.TLS
}

// clientTLS is the TLS config to dial addr with; nil for plaintext. With
// Certs, the server must carry one of roles (any role when none is given);
// a plain TLS config checks no role.
func (c Config) clientTLS(addr string, roles ...certs.Role) *tls.Config {
	if c.Certs != nil {
		tc := c.Certs.ClientConfig(addr, roles...)
		if c.TLSServerName != "" {
			tc.ServerName = c.TLSServerName
		}
		return tc
	}
	return c.TLS
}

// verifiesClientCerts reports whether a server with cfg knows its clients'
// verified certificates, so that authorization can be enforced.
func verifiesClientCerts(cfg *tls.Config) bool {
	return cfg != nil && (cfg.ClientAuth == tls.RequireAndVerifyClientCert || cfg.ClientAuth == tls.VerifyClientCertIfGiven)
}
