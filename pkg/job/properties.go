package job

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Index types lancemaster can build (DESIGN.md §1).
const (
	IndexIVFPQ  = "IVF_PQ"
	IndexBTree  = "BTREE"
	IndexBitmap = "BITMAP"
)

// Property is one user-supplied key=value of an index definition.
type Property struct{ Key, Value string }

// Limits are the cluster-wide bounds property validation needs.
type Limits struct {
	MaxNumPartitions int64 // lance_index_max_num_partitions
	MaxNumSubVectors int64 // lance_index_max_num_sub_vectors
}

// Metrics IVF_PQ accepts.
var ivfPQMetrics = map[string]bool{"l2": true, "cosine": true, "dot": true}

// NormalizeIndexType uppercases an index type and checks it is known.
func NormalizeIndexType(t string) (string, error) {
	u := strings.ToUpper(strings.TrimSpace(t))
	switch u {
	case IndexIVFPQ, IndexBTree, IndexBitmap:
		return u, nil
	}
	return "", Errorf(CodeInvalid, "unknown index type %q (want IVF_PQ, BTREE or BITMAP)", truncateForError(t))
}

// IsVectorIndex reports whether an index type indexes a vector column.
func IsVectorIndex(indexType string) bool { return indexType == IndexIVFPQ }

// CanonicalProperties validates the properties of an index definition and
// returns their canonical JSON (DESIGN.md §5 step 2 and 6): keys lowercased
// and sorted, metric lowercased, numbers as JSON numbers. Unknown or duplicate
// keys (after lowercasing) and out-of-range values are INVALID. BTREE and
// BITMAP take no properties ("{}").
func CanonicalProperties(indexType string, props []Property, lim Limits) (string, error) {
	seen := make(map[string]string, len(props))
	for _, p := range props {
		k := strings.ToLower(strings.TrimSpace(p.Key))
		if _, dup := seen[k]; dup {
			return "", Errorf(CodeInvalid, "property %q is given twice", truncateForError(k))
		}
		seen[k] = strings.TrimSpace(p.Value)
	}
	canon := map[string]any{}
	switch indexType {
	case IndexBTree, IndexBitmap:
		for k := range seen {
			return "", Errorf(CodeInvalid, "%s takes no properties; got %q", indexType, truncateForError(k))
		}
	case IndexIVFPQ:
		for k, v := range seen {
			switch k {
			case "metric":
				m := strings.ToLower(v)
				if !ivfPQMetrics[m] {
					return "", Errorf(CodeInvalid, "metric %q is not one of l2, cosine, dot", truncateForError(v))
				}
				canon[k] = m
			case "num_partitions":
				n, err := parseRange(k, v, 1, lim.MaxNumPartitions)
				if err != nil {
					return "", err
				}
				canon[k] = n
			case "num_sub_vectors":
				n, err := parseRange(k, v, 1, lim.MaxNumSubVectors)
				if err != nil {
					return "", err
				}
				canon[k] = n
			case "num_bits":
				n, err := parseRange(k, v, 1, 8)
				if err != nil {
					return "", err
				}
				if n != 4 && n != 8 {
					return "", Errorf(CodeInvalid, "num_bits must be 4 or 8")
				}
				canon[k] = n
			default:
				return "", Errorf(CodeInvalid, "IVF_PQ does not take property %q (want metric, num_partitions, num_sub_vectors, num_bits)", truncateForError(k))
			}
		}
	default:
		return "", Errorf(CodeInvalid, "unknown index type %q", truncateForError(indexType))
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

// CheckPropertyBounds re-checks canonical properties against the option
// bounds in force (DESIGN.md §13.8: the FSM's admit re-checks at apply time
// what the leader validated against its own view). Only the bounded keys
// are read; their values are JSON integers in canonical properties.
func CheckPropertyBounds(propertiesJSON string, lim Limits) error {
	if propertiesJSON == "" || propertiesJSON == "{}" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(propertiesJSON), &m); err != nil {
		return Errorf(CodeInvalid, "properties are not a JSON object")
	}
	for _, b := range []struct {
		key, option string
		max         int64
	}{
		{"num_partitions", "lance_index_max_num_partitions", lim.MaxNumPartitions},
		{"num_sub_vectors", "lance_index_max_num_sub_vectors", lim.MaxNumSubVectors},
	} {
		raw, ok := m[b.key]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return Errorf(CodeInvalid, "%s is not an integer", b.key)
		}
		if n > b.max {
			return Errorf(CodeInvalid, "%s is %d; %s is now %d", b.key, n, b.option, b.max)
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
