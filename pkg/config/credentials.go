package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// The storage option bounds and the credentials reference's are pkg/job's
// (job.MaxStorageOptions, job.MaxStorageOptionKeyBytes, MaxStorageOptionValBytes,
// job.MaxCredentialsRefBytes): the journal and the backend check the same ones.
const (
	// maxCredentialsFile bounds what is read of a credentials file: well
	// above 64 options at their largest, even JSON-escaped.
	maxCredentialsFile = 1 << 20
)

// CredentialSource resolves a catalog's credentials reference to the storage
// options sent with a request. It runs on the sending node at send time, so
// rotated keys are picked up by the next send (DESIGN.md §1).
//
// Contract: safe for concurrent use; an empty ref resolves to no options
// (nil, nil); the result is a fresh map the caller owns and satisfies
// CheckStorageOptions; errors name the reference and what is wrong, and
// never contain an option's key or value.
type CredentialSource interface {
	Resolve(ref string) (map[string]string, error)
}

// CredentialsError is a failure to resolve a reference. Its message is safe
// to log and to show an operator: it never carries file content.
type CredentialsError struct {
	Ref    string
	Reason string
	Err    error // an os error (file missing, permission), or nil
}

func (e *CredentialsError) Error() string {
	return fmt.Sprintf("credentials %q: %s", clip(e.Ref), e.Reason)
}

func (e *CredentialsError) Unwrap() error { return e.Err }

// DirCredentials reads `<Dir>/<ref>` on every Resolve, so a rotated file is
// used by the next send. The file holds either a flat JSON object of string
// to string, or KEY=VALUE lines (blank lines and lines starting with '#'
// are skipped; key and value are trimmed; no quoting). Duplicate keys, empty
// keys and anything beyond the §10 bounds are rejected. A symlink to a
// regular file is followed (Kubernetes secret volumes are symlinks).
//
// Safe for concurrent use: it holds no state.
type DirCredentials struct {
	Dir string
}

// Resolve implements CredentialSource.
func (d DirCredentials) Resolve(ref string) (map[string]string, error) {
	if ref == "" {
		return nil, nil
	}
	if err := ValidateCredentialsRef(ref); err != nil {
		return nil, err
	}
	if d.Dir == "" {
		return nil, &CredentialsError{Ref: ref, Reason: "no secrets directory is configured (secrets_dir)"}
	}
	f, err := os.Open(filepath.Join(d.Dir, ref))
	if err != nil {
		reason := "cannot open the credentials file in the secrets directory"
		if errors.Is(err, os.ErrNotExist) {
			reason = "no such file in the secrets directory"
		} else if errors.Is(err, os.ErrPermission) {
			reason = "permission denied reading the credentials file"
		}
		return nil, &CredentialsError{Ref: ref, Reason: reason, Err: err}
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, &CredentialsError{Ref: ref, Reason: "not a regular file", Err: err}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxCredentialsFile+1))
	if err != nil {
		return nil, &CredentialsError{Ref: ref, Reason: "cannot read the credentials file", Err: err}
	}
	if len(data) > maxCredentialsFile {
		return nil, &CredentialsError{Ref: ref, Reason: fmt.Sprintf("file is larger than %d bytes", maxCredentialsFile)}
	}
	opts, reason := parseCredentials(data)
	if reason != "" {
		return nil, &CredentialsError{Ref: ref, Reason: reason}
	}
	return opts, nil
}

// ValidateCredentialsRef checks that a non-empty reference is a plain file
// name: at most 255 bytes of UTF-8, no path separator, no control
// character, not "." or "..".
func ValidateCredentialsRef(ref string) error {
	bad := func(why string) error { return &CredentialsError{Ref: ref, Reason: "invalid reference: " + why} }
	switch {
	case ref == "":
		return nil
	case len(ref) > job.MaxCredentialsRefBytes:
		return bad(fmt.Sprintf("longer than %d bytes", job.MaxCredentialsRefBytes))
	case !utf8.ValidString(ref):
		return bad("not valid UTF-8")
	case ref == "." || ref == "..":
		return bad("must be a file name")
	case strings.ContainsAny(ref, `/\`):
		return bad("must be a plain file name, without a path separator")
	case strings.ContainsFunc(ref, unicode.IsControl):
		return bad("contains a control character")
	}
	return nil
}

// parseCredentials parses the content of a credentials file (see
// DirCredentials). On failure it returns a reason that names positions
// ("option 3", "line 7", "byte 12"), never content.
func parseCredentials(data []byte) (map[string]string, string) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // UTF-8 BOM
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return map[string]string{}, ""
	}
	switch trimmed[0] {
	case '{':
		return parseJSONCredentials(trimmed)
	case '[':
		return nil, "a JSON array; want a JSON object of string to string"
	}
	return parseLineCredentials(data)
}

// optionSet collects options, enforcing the bounds as they arrive.
type optionSet struct {
	opts  map[string]string
	order map[string]int // key -> option number, for duplicate reports
}

func (s *optionSet) add(where string, n int, k, v string) string {
	switch {
	case n > job.MaxStorageOptions:
		return fmt.Sprintf("more than %d options", job.MaxStorageOptions)
	case k == "":
		return where + ": empty key"
	case len(k) > job.MaxStorageOptionKeyBytes:
		return fmt.Sprintf("%s: key is longer than %d bytes", where, job.MaxStorageOptionKeyBytes)
	case len(v) > job.MaxStorageOptionValBytes:
		return fmt.Sprintf("%s: value is longer than %d bytes", where, job.MaxStorageOptionValBytes)
	case !utf8.ValidString(k) || !utf8.ValidString(v):
		return where + ": not valid UTF-8"
	}
	if first, dup := s.order[k]; dup {
		return fmt.Sprintf("%s: duplicate key (same as option %d)", where, first)
	}
	s.opts[k] = v
	s.order[k] = n
	return ""
}

func newOptionSet() *optionSet {
	return &optionSet{opts: map[string]string{}, order: map[string]int{}}
}

func parseJSONCredentials(data []byte) (map[string]string, string) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	// jsonReason turns a decoder error into a position, dropping its text
	// (which quotes the offending input).
	jsonReason := func(err error) string {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Sprintf("not a valid JSON object (syntax error at byte %d)", se.Offset)
		}
		return "not a valid JSON object (truncated)"
	}
	if _, err := dec.Token(); err != nil { // the opening '{', checked by the caller
		return nil, jsonReason(err)
	}
	set := newOptionSet()
	for n := 1; dec.More(); n++ {
		where := fmt.Sprintf("option %d", n)
		kt, err := dec.Token()
		if err != nil {
			return nil, jsonReason(err)
		}
		vt, err := dec.Token()
		if err != nil {
			return nil, jsonReason(err)
		}
		v, ok := vt.(string)
		if !ok {
			return nil, where + ": value must be a JSON string"
		}
		if reason := set.add(where, n, kt.(string), v); reason != "" {
			return nil, reason
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, jsonReason(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, "unexpected content after the JSON object"
	}
	return set.opts, ""
}

func parseLineCredentials(data []byte) (map[string]string, string) {
	set := newOptionSet()
	n := 0
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		n++
		where := fmt.Sprintf("line %d (option %d)", i+1, n)
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, where + ": expected KEY=VALUE"
		}
		if reason := set.add(where, n, strings.TrimSpace(k), strings.TrimSpace(v)); reason != "" {
			return nil, reason
		}
	}
	return set.opts, ""
}

// CheckStorageOptions checks a set of storage options against the §10
// bounds: at most 64 options, keys 1..256 bytes, values at most 4096 bytes,
// valid UTF-8. The error never names a key or a value.
func CheckStorageOptions(opts map[string]string) error {
	if len(opts) > job.MaxStorageOptions {
		return fmt.Errorf("storage options: %d options; at most %d are allowed", len(opts), job.MaxStorageOptions)
	}
	for k, v := range opts {
		switch {
		case k == "":
			return errors.New("storage options: an option has an empty key")
		case len(k) > job.MaxStorageOptionKeyBytes:
			return fmt.Errorf("storage options: a key is longer than %d bytes", job.MaxStorageOptionKeyBytes)
		case len(v) > job.MaxStorageOptionValBytes:
			return fmt.Errorf("storage options: a value is longer than %d bytes", job.MaxStorageOptionValBytes)
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return errors.New("storage options: an option is not valid UTF-8")
		}
	}
	return nil
}

// StaticCredentials is an in-memory CredentialSource, for tests and
// embedding: ref → options. Unknown refs fail like a missing file. Safe for
// concurrent use as long as the map is not modified.
type StaticCredentials map[string]map[string]string

// Resolve implements CredentialSource.
func (s StaticCredentials) Resolve(ref string) (map[string]string, error) {
	if ref == "" {
		return nil, nil
	}
	opts, ok := s[ref]
	if !ok {
		return nil, &CredentialsError{Ref: ref, Reason: "no such credentials", Err: os.ErrNotExist}
	}
	if err := CheckStorageOptions(opts); err != nil {
		return nil, &CredentialsError{Ref: ref, Reason: strings.TrimPrefix(err.Error(), "storage options: ")}
	}
	return maps.Clone(opts), nil
}

var (
	_ CredentialSource = DirCredentials{}
	_ CredentialSource = StaticCredentials{}
)
