package job

import "testing"

// The schema contracts of the types admitted before this release are pinned
// byte for byte: an admitted job's contract is compared by the builder, and
// equal columns must keep giving equal bytes.
func TestSchemaContractGolden(t *testing.T) {
	cases := []struct {
		f    Field
		typ  string
		want string
	}{
		{Field{ID: 1, Name: "Vector", Type: "fixed_size_list", ListDimension: 8, ElementType: "float32"}, IndexIVFPQ,
			`{"v":1,"fields":[{"id":1,"name":"vector","type":"fixed_size_list","nullable":false,"dim":8,"elem":"float32"}]}`},
		{Field{ID: 3, Name: "emb16", Type: "fixed_size_list", Nullable: true, ListDimension: 1536, ElementType: "float16", ElementNullable: true}, IndexIVFPQ,
			`{"v":1,"fields":[{"id":3,"name":"emb16","type":"fixed_size_list","nullable":true,"dim":1536,"elem":"float16","elem_nullable":true}]}`},
		{Field{ID: 0, Name: "id", Type: "int32"}, IndexBTree,
			`{"v":1,"fields":[{"id":0,"name":"id","type":"int32","nullable":false}]}`},
		{Field{ID: 2, Name: "Text", Type: "utf8", Nullable: true}, IndexBitmap,
			`{"v":1,"fields":[{"id":2,"name":"text","type":"utf8","nullable":true}]}`},
		// New: a list carries its element (no dimension).
		{Field{ID: 4, Name: "Tags", Type: "list", Nullable: true, ElementType: "utf8", ElementNullable: true}, IndexLabelList,
			`{"v":1,"fields":[{"id":4,"name":"tags","type":"list","nullable":true,"elem":"utf8","elem_nullable":true}]}`},
	}
	for _, c := range cases {
		got, err := SchemaContract(c.f, c.typ)
		if err != nil || got != c.want {
			t.Errorf("%s on %s:\n got %s, %v\nwant %s", c.typ, c.f.Name, got, err, c.want)
		}
		// The contract does not depend on the type or the properties.
		if again, err := ColumnContract(c.f, c.typ, `{"metric":"cosine"}`); err != nil || again != got {
			t.Errorf("%s with properties: %s %v", c.typ, again, err)
		}
	}
}

func TestColumnContractChecksTheColumnType(t *testing.T) {
	vec := func(elem string) Field {
		return Field{ID: 1, Name: "v", Type: "fixed_size_list", ListDimension: 16, ElementType: elem}
	}
	list := func(typ, elem string) Field { return Field{ID: 2, Name: "tags", Type: typ, ElementType: elem} }
	scalar := func(typ string) Field { return Field{ID: 3, Name: "s", Type: typ} }
	hamming := `{"metric":"hamming"}`
	vectors := []string{IndexIVFPQ, IndexIVFFlat, IndexIVFRQ, IndexIVFHNSWSQ, IndexIVFHNSWPQ}

	type tc struct {
		f     Field
		typ   string
		props string
		says  string // "" = accepted
	}
	var cases []tc
	for _, typ := range vectors {
		for _, elem := range []string{"float16", "float32", "float64"} {
			cases = append(cases, tc{vec(elem), typ, "", ""})
		}
		cases = append(cases,
			tc{vec("uint8"), typ, "", `column "v" is fixed_size_list<uint8>[16]; ` + typ + ` needs a fixed-size list of float16, float32 or float64`},
			tc{vec("int32"), typ, "", "is fixed_size_list<int32>[16]"},
			tc{scalar("utf8"), typ, "", `column "s" is utf8; ` + typ},
			tc{list("list", "float32"), typ, "", "is list<float32>"},
			tc{Field{Name: "v", Type: "fixed_size_list", ElementType: "float32"}, typ, "", "needs a fixed-size list"},
		)
	}
	cases = append(cases,
		tc{vec("uint8"), IndexIVFFlat, hamming, ""},
		tc{vec("uint8"), IndexIVFFlat, "", "only with metric=hamming"},
		tc{vec("uint8"), IndexIVFFlat, `{"metric":"l2"}`, "only with metric=hamming"},
		tc{vec("float32"), IndexIVFFlat, hamming, "is fixed_size_list<float32>[16]; metric hamming needs a fixed-size list of uint8"},
		tc{list("list", "uint8"), IndexIVFFlat, hamming, "metric hamming needs a fixed-size list of uint8"},
		tc{vec("float32"), IndexIVFPQ, `{"num_sub_vectors":4}`, ""},
		tc{vec("float32"), IndexIVFPQ, `{"num_sub_vectors":16}`, ""},
		tc{vec("float32"), IndexIVFPQ, `{"num_sub_vectors":5}`, `num_sub_vectors 5 does not divide the dimension 16 of column "v"`},
		tc{vec("float16"), IndexIVFHNSWPQ, `{"num_sub_vectors":32}`, "num_sub_vectors 32 does not divide the dimension 16"},

		tc{list("list", "utf8"), IndexLabelList, "", ""},
		tc{list("large_list", "int64"), IndexLabelList, "", ""},
		tc{list("list", "struct"), IndexLabelList, "", "is list<struct>; LABEL_LIST needs a list or large_list of a scalar type"},
		tc{list("list", "list"), IndexLabelList, "", "is list<list>"},
		tc{list("list", ""), IndexLabelList, "", "did not report its element type"},
		tc{vec("float32"), IndexLabelList, "", "is fixed_size_list<float32>[16]; LABEL_LIST"},
		tc{scalar("utf8"), IndexLabelList, "", "is utf8; LABEL_LIST"},

		tc{scalar("utf8"), IndexFTS, "", ""},
		tc{scalar("large_utf8"), IndexFTS, "", ""},
		tc{scalar("utf8"), IndexFM, "", ""},
		tc{scalar("large_utf8"), IndexFM, "", ""},
		tc{scalar("binary"), IndexFTS, "", `column "s" is binary; FTS needs a utf8 or large_utf8 column`},
		tc{scalar("int64"), IndexFM, "", "is int64; FM needs a utf8 or large_utf8 column"},
		tc{list("list", "utf8"), IndexFTS, "", "is list<utf8>; FTS"},
	)
	for _, typ := range []string{IndexBTree, IndexBitmap} {
		for _, s := range []string{"int32", "uint64", "utf8", "large_utf8", "bool", "float64", "date32", "timestamp", "binary"} {
			cases = append(cases, tc{scalar(s), typ, "", ""})
		}
		cases = append(cases,
			tc{vec("float32"), typ, "", "is fixed_size_list<float32>[16]; " + typ + " needs a scalar column"},
			tc{list("list", "utf8"), typ, "", "is list<utf8>"},
			tc{list("large_list", "utf8"), typ, "", "is large_list<utf8>"},
			tc{scalar("struct"), typ, "", "is struct"},
			tc{scalar("map"), typ, "", "is map"},
			tc{scalar("dictionary"), typ, "", "is dictionary"},
		)
	}
	for _, c := range cases {
		got, err := ColumnContract(c.f, c.typ, c.props)
		if c.says == "" {
			if err != nil || got == "" {
				t.Errorf("%s on %s %s: %v", c.typ, describeType(c.f), c.props, err)
			}
			continue
		}
		wantInvalid(t, c.typ+" on "+describeType(c.f)+" "+c.props, err, c.says)
	}
}
