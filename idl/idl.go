// Package idl holds the Thrift contract (wire.thrift, admin.thrift,
// journal.thrift) and their fingerprints: a binary announces the contract
// it was built from (`lancemaster version`), so two masters or a master and
// a backend built from different contracts can be told apart at a glance.
package idl

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
)

var (
	//go:embed wire.thrift
	wireIDL []byte
	//go:embed admin.thrift
	adminIDL []byte
	//go:embed journal.thrift
	journalIDL []byte
)

func fingerprint(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:6])
}

// Fingerprints of the three IDL files: the first 12 hex digits of each
// file's SHA-256.
var (
	WireFingerprint    = fingerprint(wireIDL)
	AdminFingerprint   = fingerprint(adminIDL)
	JournalFingerprint = fingerprint(journalIDL)
)
