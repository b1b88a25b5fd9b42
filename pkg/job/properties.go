package job

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Index types lancemaster can build (DESIGN.md §1, §14; docs/index-types.md).
const (
	IndexIVFPQ     = "IVF_PQ"
	IndexIVFFlat   = "IVF_FLAT"
	IndexIVFRQ     = "IVF_RQ"
	IndexIVFHNSWSQ = "IVF_HNSW_SQ"
	IndexIVFHNSWPQ = "IVF_HNSW_PQ"
	IndexBTree     = "BTREE"
	IndexBitmap    = "BITMAP"
	IndexLabelList = "LABEL_LIST"
	IndexFTS       = "FTS"
	IndexFM        = "FM"
)

// SupportedIndexTypes are the types admission accepts, in documentation order.
var SupportedIndexTypes = []string{IndexIVFPQ, IndexIVFFlat, IndexIVFRQ, IndexIVFHNSWSQ, IndexIVFHNSWPQ,
	IndexBTree, IndexBitmap, IndexLabelList, IndexFTS, IndexFM}

// unsupportedIndexTypes are Lance index types the backend's library
// (@lancedb/lancedb) cannot build; the value is advice for the user.
var unsupportedIndexTypes = map[string]string{
	"IVF_SQ":        "",
	"IVF_HNSW_FLAT": "",
	"NGRAM":         "",
	"ZONEMAP":       "",
	"BLOOMFILTER":   "",
	"INVERTED":      "; use FTS, which builds Lance's inverted full-text index",
}

// Property is one user-supplied key=value of an index definition.
type Property struct{ Key, Value string }

// Limits are the cluster-wide bounds property validation needs. A zero
// bound admits no value of its key (a caller that does not set it refuses
// rather than admits): build them as job.Limits(opts.IndexLimits()), a
// conversion from options.IndexLimits, whose fields are these.
type Limits struct {
	MaxNumPartitions      int64 // lance_index_max_num_partitions
	MaxNumSubVectors      int64 // lance_index_max_num_sub_vectors
	MaxHNSWM              int64 // lance_index_max_hnsw_m
	MaxHNSWEfConstruction int64 // lance_index_max_hnsw_ef_construction
	MaxSampleRate         int64 // lance_index_max_sample_rate
	MaxMaxIterations      int64 // lance_index_max_max_iterations
	MaxFTSTokenLength     int64 // lance_index_max_fts_token_length
}

// NormalizeIndexType uppercases an index type and checks it is supported.
// A Lance type the backend's library cannot build and an unknown type are
// INVALID, and the error lists the supported ones.
func NormalizeIndexType(t string) (string, error) {
	u := strings.ToUpper(strings.TrimSpace(t))
	for _, s := range SupportedIndexTypes {
		if u == s {
			return u, nil
		}
	}
	if advice, known := unsupportedIndexTypes[u]; known {
		return "", Errorf(CodeInvalid, "index type %s is not supported by this backend's library%s (supported: %s)",
			u, advice, strings.Join(SupportedIndexTypes, ", "))
	}
	return "", Errorf(CodeInvalid, "unknown index type %q (supported: %s)", truncateForError(t), strings.Join(SupportedIndexTypes, ", "))
}

// IsVectorIndex reports whether an index type indexes a vector column.
func IsVectorIndex(indexType string) bool { return strings.HasPrefix(indexType, "IVF_") }

// IsHNSWIndex reports whether an index type builds an HNSW graph.
func IsHNSWIndex(indexType string) bool { return strings.HasPrefix(indexType, "IVF_HNSW_") }

// CanonicalProperties validates the properties of an index definition and
// returns their canonical JSON (DESIGN.md §5 step 2 and 6): keys lowercased
// and sorted, integers as JSON numbers, booleans as JSON true/false, enum
// values lowercased, language spelled as the library spells it. Unknown or
// duplicate keys (after lowercasing) and out-of-range values are INVALID.
// A type without parameters takes none ("{}").
func CanonicalProperties(indexType string, props []Property, lim Limits) (string, error) {
	params, ok := indexParams[indexType]
	if !ok {
		return "", Errorf(CodeInvalid, "unknown index type %q", truncateForError(indexType))
	}
	seen := make(map[string]string, len(props))
	for _, p := range props {
		k := strings.ToLower(strings.TrimSpace(p.Key))
		if _, dup := seen[k]; dup {
			return "", Errorf(CodeInvalid, "property %q is given twice", truncateForError(k))
		}
		seen[k] = strings.TrimSpace(p.Value)
	}
	canon := map[string]any{}
	// Keys in the table's order, so that of several bad values the same one
	// is reported every time.
	for _, p := range params {
		v, given := seen[p.key]
		if !given {
			continue
		}
		delete(seen, p.key)
		c, err := p.parse(indexType, v, lim)
		if err != nil {
			return "", err
		}
		canon[p.key] = c
	}
	if len(seen) > 0 {
		bad := ""
		for k := range seen {
			if bad == "" || k < bad {
				bad = k
			}
		}
		if len(params) == 0 {
			return "", Errorf(CodeInvalid, "%s takes no properties; got %q", indexType, truncateForError(bad))
		}
		return "", Errorf(CodeInvalid, "%s does not take property %q (want %s)", indexType, truncateForError(bad), paramNames(params))
	}
	if err := checkNgramLengths(canon); err != nil {
		return "", err
	}
	out, err := CanonicalJSON(canon)
	if err != nil {
		return "", err
	}
	if len(out) > MaxPropertiesBytes {
		return "", Errorf(CodeInvalid, "properties are %d bytes; at most %d are allowed", len(out), MaxPropertiesBytes)
	}
	return out, nil
}

// ftsDefaultNgramLength is the library's default of both ngram lengths
// (lance-index 8, as listIndices() reports an FTS index built without them).
const ftsDefaultNgramLength = 3

// checkNgramLengths refuses ngram_min_length > ngram_max_length, also when
// one of them is left at the library's default: the library refuses the
// build then ("min_gram must not be greater than max_gram").
func checkNgramLengths(canon map[string]any) error {
	lo, hi := int64(ftsDefaultNgramLength), int64(ftsDefaultNgramLength)
	v, hasLo := canon["ngram_min_length"]
	if hasLo {
		lo = v.(int64)
	}
	v, hasHi := canon["ngram_max_length"]
	if hasHi {
		hi = v.(int64)
	}
	switch {
	case lo <= hi:
		return nil
	case hasLo && hasHi:
		return Errorf(CodeInvalid, "ngram_min_length is %d, more than ngram_max_length %d", lo, hi)
	case hasLo:
		return Errorf(CodeInvalid, "ngram_min_length is %d, more than the default ngram_max_length %d; set ngram_max_length too", lo, hi)
	}
	return Errorf(CodeInvalid, "ngram_max_length is %d, less than the default ngram_min_length %d; set ngram_min_length too", hi, lo)
}

// The options that bound properties (pkg/config's keys; pkg/job is a leaf,
// and pkg/config's tests pin the spellings).
const (
	optMaxNumPartitions      = "lance_index_max_num_partitions"
	optMaxNumSubVectors      = "lance_index_max_num_sub_vectors"
	optMaxHNSWM              = "lance_index_max_hnsw_m"
	optMaxHNSWEfConstruction = "lance_index_max_hnsw_ef_construction"
	optMaxSampleRate         = "lance_index_max_sample_rate"
	optMaxMaxIterations      = "lance_index_max_max_iterations"
	optMaxFTSTokenLength     = "lance_index_max_fts_token_length"
)

// boundedKeys are the properties an option bounds: every index type that
// takes one of these keys bounds it by the same option.
var boundedKeys = []struct {
	key, option string
	max         func(Limits) int64
}{
	{"num_partitions", optMaxNumPartitions, func(l Limits) int64 { return l.MaxNumPartitions }},
	{"num_sub_vectors", optMaxNumSubVectors, func(l Limits) int64 { return l.MaxNumSubVectors }},
	{"m", optMaxHNSWM, func(l Limits) int64 { return l.MaxHNSWM }},
	{"ef_construction", optMaxHNSWEfConstruction, func(l Limits) int64 { return l.MaxHNSWEfConstruction }},
	{"sample_rate", optMaxSampleRate, func(l Limits) int64 { return l.MaxSampleRate }},
	{"max_iterations", optMaxMaxIterations, func(l Limits) int64 { return l.MaxMaxIterations }},
	{"max_token_length", optMaxFTSTokenLength, func(l Limits) int64 { return l.MaxFTSTokenLength }},
	{"ngram_min_length", optMaxFTSTokenLength, func(l Limits) int64 { return l.MaxFTSTokenLength }},
	{"ngram_max_length", optMaxFTSTokenLength, func(l Limits) int64 { return l.MaxFTSTokenLength }},
}

// PropertyBounds lists each bounded property key with the option that
// bounds it, in a fixed order.
func PropertyBounds() (keys, options []string) {
	for _, b := range boundedKeys {
		keys, options = append(keys, b.key), append(options, b.option)
	}
	return keys, options
}

// CheckPropertyBounds re-checks canonical properties against the option
// bounds in force (DESIGN.md §13.8: the FSM's admit re-checks at apply time
// what the leader validated against its own view). Only the bounded keys
// (boundedKeys) are read; their values are JSON integers in canonical
// properties. The keys beyond num_partitions and num_sub_vectors occur only
// in entries of the index types this release added, which no earlier
// leader admitted, so re-checking them changes nothing an earlier entry's
// replay computes.
func CheckPropertyBounds(propertiesJSON string, lim Limits) error {
	if propertiesJSON == "" || propertiesJSON == "{}" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(propertiesJSON), &m); err != nil {
		return Errorf(CodeInvalid, "properties are not a JSON object")
	}
	for _, b := range boundedKeys {
		raw, ok := m[b.key]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return Errorf(CodeInvalid, "%s is not an integer", b.key)
		}
		if max := b.max(lim); n > max {
			return Errorf(CodeInvalid, "%s is %d; %s is now %d", b.key, n, b.option, max)
		}
	}
	return nil
}

// CanonicalJSON renders a flat object with sorted keys (encoding/json sorts
// map keys), so equal definitions have equal bytes.
func CanonicalJSON(m map[string]any) (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", Errorf(CodeInvalid, "properties cannot be encoded: %v", err)
	}
	return string(b), nil
}

func parseRange(key, v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, Errorf(CodeInvalid, "%s must be an integer", key)
	}
	if n < lo || n > hi {
		return 0, Errorf(CodeInvalid, "%s is %d; it must be between %d and %d", key, n, lo, hi)
	}
	return n, nil
}

// truncateForError keeps user input echoed in an error short.
func truncateForError(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
