package job

import (
	"regexp"
	"strings"
	"unicode"
)

// ReservedIndexPrefix is Lance's own namespace; user index names may not use it.
const ReservedIndexPrefix = "__lance"

// NormalizeIndexName is the fence's spelling of an index name: lower(display)
// with a pinned case mapping (FoldASCII), so that every release of
// lancemaster, whatever Unicode tables its Go release has, folds a name the
// same way. Non-ASCII letters keep their case.
func NormalizeIndexName(display string) string { return FoldASCII(display) }

// FoldASCII lowercases the ASCII letters A-Z and leaves every other byte as
// it is. It is the project's one pinned case mapping: what the journal
// compares must not depend on the Unicode tables of a Go release.
func FoldASCII(s string) string {
	i := 0
	for i < len(s) && !(s[i] >= 'A' && s[i] <= 'Z') {
		i++
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if c := b[i]; c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// IsASCII reports whether s is pure ASCII.
func IsASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// NormalizedNameConsistent is what Apply checks of a journaled index name
// pair, and only what cannot drift between releases: the normalized name has
// no ASCII capital, and for a pure-ASCII display name it is its FoldASCII.
// (Older leaders folded with strings.ToLower; their entries still pass.)
func NormalizedNameConsistent(display, normalized string) bool {
	for i := 0; i < len(normalized); i++ {
		if c := normalized[i]; c >= 'A' && c <= 'Z' {
			return false
		}
	}
	return !IsASCII(display) || normalized == FoldASCII(display)
}

// ValidateIndexName checks a user-supplied index name.
func ValidateIndexName(name string) error {
	if err := validateIdent("index name", name); err != nil {
		return err
	}
	if strings.HasPrefix(FoldASCII(name), ReservedIndexPrefix) {
		return Errorf(CodeInvalid, "index name %q uses the reserved prefix %q", name, ReservedIndexPrefix)
	}
	return nil
}

// ValidatePathName checks a catalog, db or table name: it becomes part of a
// dataset path (<root>/<db>/<tbl>.lance), so separators and dot-names are refused.
func ValidatePathName(field, name string) error {
	if err := validateIdent(field, name); err != nil {
		return err
	}
	if strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return Errorf(CodeInvalid, "%s %q may not contain a path separator or be . or ..", field, name)
	}
	return nil
}

// ValidateColumnName checks a column name.
func ValidateColumnName(name string) error { return validateIdent("column", name) }

// ValidateActor checks a creator or actor name.
func ValidateActor(field, name string) error {
	if err := CheckBytes(field, name, MaxNameBytes); err != nil {
		return err
	}
	if strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return Errorf(CodeInvalid, "%s contains a control character", field)
	}
	return nil
}

func validateIdent(field, name string) error {
	if err := CheckBytes(field, name, MaxNameBytes); err != nil {
		return err
	}
	if strings.TrimSpace(name) == "" {
		return Errorf(CodeInvalid, "%s is empty", field)
	}
	if strings.TrimSpace(name) != name {
		return Errorf(CodeInvalid, "%s %q has leading or trailing white space", field, name)
	}
	if strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return Errorf(CodeInvalid, "%s contains a control character", field)
	}
	return nil
}

// NormalizeLocator normalizes a dataset or catalog root URI (DESIGN.md §4.1):
// trim; lowercase the scheme only; reject userinfo ('@' in the authority);
// reject a scheme with neither authority nor path; strip trailing '/' but keep
// a root; without a scheme the path must be absolute. Errors never echo the URI.
func NormalizeLocator(uri string) (string, error) {
	if len(uri) > MaxURIBytes {
		return "", Errorf(CodeInvalid, "dataset URI is %d bytes; at most %d are allowed", len(uri), MaxURIBytes)
	}
	u := strings.TrimSpace(uri)
	if u == "" {
		return "", Errorf(CodeInvalid, "dataset URI is empty")
	}
	if strings.IndexFunc(u, unicode.IsControl) >= 0 {
		return "", Errorf(CodeInvalid, "dataset URI contains a control character")
	}
	scheme, rest, hasScheme := splitScheme(u)
	if !hasScheme {
		if !strings.HasPrefix(u, "/") {
			return "", Errorf(CodeInvalid, "a dataset path without a scheme must be absolute")
		}
		return trimTrailingSlash(u, 1), nil
	}
	authority, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if strings.Contains(authority, "@") {
		return "", Errorf(CodeInvalid, "dataset URI may not carry user information; use a credentials reference")
	}
	if authority == "" && path == "" {
		return "", Errorf(CodeInvalid, "dataset URI with scheme %q has neither authority nor path", scheme)
	}
	scheme = strings.ToLower(scheme)
	prefix := scheme + "://" + authority
	if authority == "" {
		// file:///data: the path is the whole locator; keep "/" as a root.
		return prefix + trimTrailingSlash(path, 1), nil
	}
	return prefix + trimTrailingSlash(path, 0), nil
}

// IsLocalLocator reports whether a normalized locator names a local file
// (an absolute path or file://), which needs the operator's local-file assertion.
func IsLocalLocator(loc string) bool {
	return strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "file://")
}

// DatasetLocator joins a catalog root with db and table: <root>/<db>/<tbl>.lance.
func DatasetLocator(root, db, table string) (string, error) {
	r, err := NormalizeLocator(root)
	if err != nil {
		return "", err
	}
	return NormalizeLocator(strings.TrimRight(r, "/") + "/" + db + "/" + table + ".lance")
}

func splitScheme(u string) (scheme, rest string, ok bool) {
	i := strings.Index(u, "://")
	if i <= 0 {
		return "", "", false
	}
	for j, c := range u[:i] {
		letter := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", "", false
		}
	}
	return u[:i], u[i+3:], true
}

// trimTrailingSlash strips trailing '/' but keeps at least keep characters.
func trimTrailingSlash(s string, keep int) string {
	for len(s) > keep && strings.HasSuffix(s, "/") {
		s = s[:len(s)-1]
	}
	return s
}

var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidNodeID reports whether id is a well-formed master id (node_id).
func ValidNodeID(id string) bool { return nodeIDPattern.MatchString(id) }
