package job

import (
	"encoding/json"
	"strconv"
	"strings"
)

// SchemaContractVersion is the version of the schema contract format.
const SchemaContractVersion = 1

// Field is one field of a dataset schema, as a backend's inspect reports it.
type Field struct {
	ID              int32
	Name            string
	Type            string // canonical type: int32, utf8, fixed_size_list, ...
	Nullable        bool
	ListDimension   int32  // fixed-size-list dimension, 0 otherwise
	ElementType     string // element type of a fixed-size list or a list, "" otherwise
	ElementNullable bool
}

// IndexInfo is one existing index of a dataset.
type IndexInfo struct {
	Name           string
	IndexType      string
	Columns        []string
	PropertiesJSON string
	UUID           string // the index's uuid where the backend reports it (DESIGN.md §13.7)
}

// Snapshot is the one pinned view of a dataset admission works from (DESIGN.md §5 step 3).
type Snapshot struct {
	Version int64
	Fields  []Field
	Indexes []IndexInfo
}

type contractField struct {
	ID              int32  `json:"id"`
	Name            string `json:"name"`
	Type            string `json:"type"`
	Nullable        bool   `json:"nullable"`
	Dimension       int32  `json:"dim,omitempty"`
	ElementType     string `json:"elem,omitempty"`
	ElementNullable bool   `json:"elem_nullable,omitempty"`
}

type contract struct {
	Version int             `json:"v"`
	Fields  []contractField `json:"fields"`
}

// FindColumn finds the indexed column in a snapshot: an exact name match, or
// else the only case-insensitive one. Several case-insensitive matches are AMBIGUOUS.
func (s *Snapshot) FindColumn(column string) (Field, error) {
	var folded []Field
	for _, f := range s.Fields {
		if f.Name == column {
			return f, nil
		}
		if strings.EqualFold(f.Name, column) {
			folded = append(folded, f)
		}
	}
	switch len(folded) {
	case 0:
		return Field{}, Errorf(CodeInvalid, "column %q does not exist in the dataset", truncateForError(column))
	case 1:
		return folded[0], nil
	}
	return Field{}, Errorf(CodeAmbiguous, "column %q matches %d columns that differ only in case", truncateForError(column), len(folded))
}

// SchemaContract computes schema contract v1 of the indexed column
// (DESIGN.md §5 step 5) for an index of indexType with its default
// properties; ColumnContract is the same with the admitted properties.
func SchemaContract(f Field, indexType string) (string, error) {
	return ColumnContract(f, indexType, "")
}

// ColumnContract checks that column f can carry an index of indexType with
// the canonical properties propertiesJSON ("" or "{}": the defaults) and
// computes schema contract v1 of it: field id, normalized name, canonical
// type, nullable, fixed-size-list dimension and element type/nullable (of a
// vector or a list). The bytes of the contract do not depend on the index
// type. A column of the wrong type is INVALID, and the error names its type.
func ColumnContract(f Field, indexType, propertiesJSON string) (string, error) {
	if err := checkColumnType(f, indexType, propertiesJSON); err != nil {
		return "", err
	}
	c := contract{Version: SchemaContractVersion, Fields: []contractField{{
		ID: f.ID, Name: strings.ToLower(f.Name), Type: f.Type, Nullable: f.Nullable,
		Dimension: f.ListDimension, ElementType: f.ElementType, ElementNullable: f.ElementNullable,
	}}}
	b, err := json.Marshal(c)
	if err != nil {
		return "", Errorf(CodeInternal, "schema contract cannot be encoded: %v", err)
	}
	return string(b), nil
}

// Canonical types (as inspect spells them) that a scalar index cannot be
// built on, nor a label list's element be: the nested types, and dictionary
// (which the builder refuses as well).
var nestedTypes = map[string]bool{"fixed_size_list": true, "list": true, "large_list": true,
	"struct": true, "map": true, "union": true, "dictionary": true}

var (
	floatElements = map[string]bool{"float16": true, "float32": true, "float64": true}
	textTypes     = map[string]bool{"utf8": true, "large_utf8": true}
)

// describeType spells a field's type for an error: fixed_size_list<float32>[8], list<utf8>, int64.
func describeType(f Field) string {
	t := f.Type
	if f.ElementType != "" {
		t += "<" + f.ElementType + ">"
	}
	if f.ListDimension > 0 {
		t += "[" + strconv.Itoa(int(f.ListDimension)) + "]"
	}
	return t
}

func checkColumnType(f Field, indexType, propertiesJSON string) error {
	bad := func(needs string) error {
		return Errorf(CodeInvalid, "column %q is %s; %s needs %s", f.Name, describeType(f), indexType, needs)
	}
	switch {
	case IsVectorIndex(indexType):
		p := vectorPropsOf(propertiesJSON)
		if p.Metric == "hamming" {
			// IVF_FLAT only: CanonicalProperties refuses hamming for the others.
			if f.Type != "fixed_size_list" || f.ListDimension <= 0 || f.ElementType != "uint8" {
				return Errorf(CodeInvalid, "column %q is %s; metric hamming needs a fixed-size list of uint8", f.Name, describeType(f))
			}
			return nil
		}
		if f.Type != "fixed_size_list" || f.ListDimension <= 0 || !floatElements[f.ElementType] {
			needs := "a fixed-size list of float16, float32 or float64"
			if indexType == IndexIVFFlat && f.ElementType == "uint8" {
				needs += " (a list of uint8 only with metric=hamming)"
			}
			return bad(needs)
		}
		// The library refuses it ("num_sub_vectors must divide vector dimension").
		if p.NumSubVectors > 0 && int64(f.ListDimension)%p.NumSubVectors != 0 {
			return Errorf(CodeInvalid, "num_sub_vectors %d does not divide the dimension %d of column %q", p.NumSubVectors, f.ListDimension, f.Name)
		}
	case indexType == IndexLabelList:
		if f.Type != "list" && f.Type != "large_list" {
			return bad("a list or large_list of a scalar type")
		}
		if f.ElementType == "" {
			return Errorf(CodeInvalid, "column %q is %s, but the backend did not report its element type (an older backend?); LABEL_LIST needs a list of a scalar type", f.Name, f.Type)
		}
		if nestedTypes[f.ElementType] {
			return bad("a list or large_list of a scalar type")
		}
	case indexType == IndexFTS || indexType == IndexFM:
		if !textTypes[f.Type] {
			return bad("a utf8 or large_utf8 column")
		}
	default: // BTREE, BITMAP
		if nestedTypes[f.Type] {
			return bad("a scalar column")
		}
	}
	return nil
}

// vectorProps are the properties of a vector index the column check reads.
type vectorProps struct {
	Metric        string `json:"metric"`
	NumSubVectors int64  `json:"num_sub_vectors"`
}

// vectorPropsOf reads canonical properties (zero values when unset).
func vectorPropsOf(propertiesJSON string) vectorProps {
	var p vectorProps
	if propertiesJSON != "" {
		_ = json.Unmarshal([]byte(propertiesJSON), &p) // canonical: an object; a bad one sets nothing
	}
	return p
}

// FindIndex looks an index name up case-insensitively. It returns the match,
// or AMBIGUOUS when two stored names are equal after lowercasing
// (DESIGN.md §4.1, §5 step 4).
func (s *Snapshot) FindIndex(name string) (*IndexInfo, error) {
	var hit *IndexInfo
	norm := NormalizeIndexName(name)
	for i := range s.Indexes {
		if NormalizeIndexName(s.Indexes[i].Name) != norm {
			continue
		}
		if hit != nil {
			return nil, Errorf(CodeAmbiguous, "index name %q matches several indexes that differ only in case; resolve it in the dataset first", truncateForError(name))
		}
		hit = &s.Indexes[i]
	}
	return hit, nil
}
