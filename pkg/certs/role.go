// Package certs is lancemaster's certificate model: which role a
// certificate grants (master, backend or operator), and a development CA
// that issues one certificate per role (`make certs`, `lancemaster certs
// init`). pkg/rpc reads the role of every verified peer certificate to
// authorize its calls (docs/rpc.md).
//
// # The role is a URI SAN
//
// A certificate's role is one URI subject alternative name,
//
//	spiffe://lancemaster/role/master
//	spiffe://lancemaster/role/backend
//	spiffe://lancemaster/role/operator
//
// and nothing else: not the common name, not the organization, not the key
// usage. A URI SAN is covered by the CA's signature like the DNS and IP
// names, it is easy to check (openssl x509 -noout -ext subjectAltName), and
// it cannot be confused with a host name. RoleOf is strict: a certificate
// with no role URI, two of them (even equal), an unknown role, or any other
// URI in the lancemaster trust domain has no role, and a peer without a role
// may call nothing.
//
// It is a leaf package: it imports nothing of lancemaster's.
package certs

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Role is what a certificate lets its holder do (docs/rpc.md, the
// authorization table).
type Role string

// The roles.
const (
	// RoleMaster is a master: it serves the admin API, forwards to the
	// leader, dials backends, and is the only role Raft accepts.
	RoleMaster Role = "master"
	// RoleBackend is a backend agent: it serves dispatches and reports to
	// the masters.
	RoleBackend Role = "backend"
	// RoleOperator is the CLI: it may call every admin method of the
	// masters, and nothing on backends.
	RoleOperator Role = "operator"
)

// Roles lists every role.
var Roles = []Role{RoleMaster, RoleBackend, RoleOperator}

// TrustDomain is the authority of every role URI.
const TrustDomain = "lancemaster"

const (
	roleScheme     = "spiffe"
	rolePathPrefix = "/role/"
)

// ErrNoRole is returned by RoleOf for a certificate without a role URI.
var ErrNoRole = errors.New("certs: the certificate carries no lancemaster role (URI SAN spiffe://lancemaster/role/<role>)")

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool {
	switch r {
	case RoleMaster, RoleBackend, RoleOperator:
		return true
	}
	return false
}

// URI is the role's URI SAN, spiffe://lancemaster/role/<r>.
func (r Role) URI() *url.URL {
	return &url.URL{Scheme: roleScheme, Host: TrustDomain, Path: rolePathPrefix + string(r)}
}

func (r Role) String() string {
	if r == "" {
		return "none"
	}
	return string(r)
}

// ParseRole parses a role name.
func ParseRole(s string) (Role, error) {
	r := Role(strings.TrimSpace(s))
	if !r.Valid() {
		return "", fmt.Errorf("certs: unknown role %q: use master, backend or operator", s)
	}
	return r, nil
}

// RoleOf returns the role c carries. It fails with ErrNoRole when c has no
// URI in the lancemaster trust domain, and with another error when it has
// more than one, or one that is not exactly a known role's URI. Call it on
// a verified certificate only (tls.ConnectionState.VerifiedChains[0][0]):
// the role is worth what the CA's signature is.
func RoleOf(c *x509.Certificate) (Role, error) {
	if c == nil {
		return "", ErrNoRole
	}
	var found []Role
	for _, u := range c.URIs {
		if !strings.EqualFold(u.Scheme, roleScheme) || !strings.EqualFold(u.Host, TrustDomain) {
			continue // another trust domain's URI: not ours to read
		}
		r, err := roleFromURI(u)
		if err != nil {
			return "", err
		}
		found = append(found, r)
	}
	switch len(found) {
	case 0:
		return "", ErrNoRole
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("certs: the certificate carries %d lancemaster role URIs; exactly one is allowed", len(found))
}

// roleFromURI accepts exactly spiffe://lancemaster/role/<known role>: no
// user, port, query, fragment, trailing slash, escaping or case variant.
func roleFromURI(u *url.URL) (Role, error) {
	bad := fmt.Errorf("certs: malformed lancemaster URI SAN %q: want spiffe://%s/role/<master|backend|operator>", clip(u.String()), TrustDomain)
	if u.Scheme != roleScheme || u.Host != TrustDomain || u.User != nil || u.Opaque != "" ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawPath != "" {
		return "", bad
	}
	name, ok := strings.CutPrefix(u.Path, rolePathPrefix)
	if !ok {
		return "", bad
	}
	r := Role(name)
	if !r.Valid() {
		return "", bad
	}
	return r, nil
}

func clip(s string) string {
	const max = 128
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
