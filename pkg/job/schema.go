package job

import (
	"encoding/json"
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
	ElementType     string // vector element type, "" otherwise
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
// (DESIGN.md §5 step 5): field id, normalized name, canonical type, nullable,
// fixed-size-list dimension and vector element type/nullable. A vector index
// needs a fixed-size list of float16 or float32.
func SchemaContract(f Field, indexType string) (string, error) {
	if IsVectorIndex(indexType) {
		if f.Type != "fixed_size_list" || f.ListDimension <= 0 {
			return "", Errorf(CodeInvalid, "column %q is %s; %s needs a fixed-size list of float16 or float32", f.Name, f.Type, indexType)
		}
		if f.ElementType != "float16" && f.ElementType != "float32" {
			return "", Errorf(CodeInvalid, "column %q has %s elements; %s needs float16 or float32", f.Name, f.ElementType, indexType)
		}
	} else if f.Type == "fixed_size_list" || f.Type == "list" || f.Type == "struct" {
		return "", Errorf(CodeInvalid, "column %q is %s; %s needs a scalar column", f.Name, f.Type, indexType)
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
