package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
)

// A TLS / plaintext mismatch between the CLI and a master shows up as a
// bare EOF (a TLS master drops a plaintext frame; a plaintext master drops
// a ClientHello). When a call ends that way, the CLI asks the address
// itself whether it speaks TLS and says what is wrong instead.

const tlsProbeTimeout = 2 * time.Second

// looksLikeMismatch: the connection ended before any answer.
func looksLikeMismatch(err error) bool {
	if err == nil {
		return false
	}
	var rh tls.RecordHeaderError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.As(err, &rh) || strings.Contains(err.Error(), "first record does not look like a TLS handshake")
}

// speaksTLS tells whether addr completes a TLS handshake (known false when
// it cannot say: the address is unreachable, or another error).
func speaksTLS(addr string) (speaks, known bool) {
	ctx, cancel := context.WithTimeout(context.Background(), tlsProbeTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, false
	}
	defer raw.Close()
	// Only "does it speak TLS at all": nothing is sent after the handshake
	// and the peer's certificate is not trusted for anything.
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // a probe, no data
	err = c.HandshakeContext(ctx)
	if err == nil {
		return true, true
	}
	var rh tls.RecordHeaderError
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.As(err, &rh) {
		return false, true
	}
	return false, false
}

// tlsMismatch is the usage hint for a call that failed with err against
// addrs, or "" when TLS is not the problem.
func (g *globals) tlsMismatch(addrs []string, err error) string {
	if !looksLikeMismatch(err) || len(addrs) == 0 {
		return ""
	}
	speaks, known := speaksTLS(addrs[0])
	switch {
	case !known:
		return ""
	case speaks && !g.tls.Enabled():
		return "the master at " + addrs[0] + " requires TLS: pass --" + flagTLSCA + ", --" + flagTLSCert + " and --" + flagTLSKey +
			" (or " + envTLSCA + ", " + envTLSCert + ", " + envTLSKey + "); nothing was applied"
	case !speaks && g.tls.Enabled():
		return "the master at " + addrs[0] + " does not speak TLS: drop the --tls-* flags (and " + envTLSCA +
			"...) for a plaintext cluster; nothing was applied"
	}
	return ""
}
