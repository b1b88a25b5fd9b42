package job

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/options"
)

// defaultLimits are the bounds of the default options.
func defaultLimits() Limits { return Limits(options.Resolve(nil).IndexLimits()) }

func wantInvalid(t *testing.T, what string, err error, contains ...string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalid {
		t.Errorf("%s: got %v; want an INVALID error", what, err)
		return
	}
	for _, c := range contains {
		if !strings.Contains(e.Message, c) {
			t.Errorf("%s: %q does not say %q", what, e.Message, c)
		}
	}
}

func TestNormalizeIndexTypeKnowsTheTenTypes(t *testing.T) {
	for _, typ := range []string{"IVF_PQ", "IVF_FLAT", "IVF_RQ", "IVF_HNSW_SQ", "IVF_HNSW_PQ", "BTREE", "BITMAP", "LABEL_LIST", "FTS", "FM"} {
		if got, err := NormalizeIndexType(" " + strings.ToLower(typ) + " "); err != nil || got != typ {
			t.Errorf("NormalizeIndexType(%s) = %q, %v", typ, got, err)
		}
		if _, ok := indexParams[typ]; !ok {
			t.Errorf("%s has no parameter table", typ)
		}
	}
	for _, typ := range []string{"IVF_SQ", "ivf_hnsw_flat", "NGRAM", "ZONEMAP", "BloomFilter", "INVERTED"} {
		_, err := NormalizeIndexType(typ)
		wantInvalid(t, typ, err, strings.ToUpper(typ)+" is not supported by this backend's library", "supported: IVF_PQ")
	}
	_, err := NormalizeIndexType("inverted")
	wantInvalid(t, "INVERTED", err, "use FTS")
	_, err = NormalizeIndexType("hnsw")
	wantInvalid(t, "hnsw", err, `unknown index type "hnsw"`, "IVF_PQ, IVF_FLAT, IVF_RQ, IVF_HNSW_SQ, IVF_HNSW_PQ, BTREE, BITMAP, LABEL_LIST, FTS, FM")
}

func TestCanonicalPropertiesOfEveryType(t *testing.T) {
	lim := defaultLimits()
	ok := []struct {
		typ   string
		props []Property
		want  string
	}{
		{IndexIVFPQ, []Property{{"Metric", "DOT"}, {"num_partitions", "4096"}, {"num_sub_vectors", "256"}, {"num_bits", "4"},
			{"MAX_ITERATIONS", "200"}, {"sample_rate", "1024"}},
			`{"max_iterations":200,"metric":"dot","num_bits":4,"num_partitions":4096,"num_sub_vectors":256,"sample_rate":1024}`},
		{IndexIVFFlat, []Property{{"metric", "Hamming"}, {"num_partitions", "8"}, {"max_iterations", "1"}, {"sample_rate", "1"}},
			`{"max_iterations":1,"metric":"hamming","num_partitions":8,"sample_rate":1}`},
		{IndexIVFRQ, []Property{{"metric", "cosine"}, {"num_bits", "1"}, {"num_partitions", "2"}}, `{"metric":"cosine","num_bits":1,"num_partitions":2}`},
		{IndexIVFRQ, []Property{{"num_bits", "8"}, {"max_iterations", "5"}, {"sample_rate", "10"}}, `{"max_iterations":5,"num_bits":8,"sample_rate":10}`},
		{IndexIVFHNSWSQ, []Property{{"metric", "l2"}, {"num_partitions", "1"}, {"m", "64"}, {"ef_construction", "1000"},
			{"max_iterations", "10"}, {"sample_rate", "64"}},
			`{"ef_construction":1000,"m":64,"max_iterations":10,"metric":"l2","num_partitions":1,"sample_rate":64}`},
		{IndexIVFHNSWPQ, []Property{{"m", "16"}, {"ef_construction", "150"}, {"num_sub_vectors", "8"}, {"num_partitions", "16"}},
			`{"ef_construction":150,"m":16,"num_partitions":16,"num_sub_vectors":8}`},
		{IndexBTree, nil, "{}"},
		{IndexBitmap, nil, "{}"},
		{IndexLabelList, nil, "{}"},
		{IndexFM, nil, "{}"},
		{IndexFTS, nil, "{}"},
		{IndexFTS, []Property{{"ngram_min_length", "1"}}, `{"ngram_min_length":1}`},
		{IndexFTS, []Property{{"ngram_max_length", "9"}}, `{"ngram_max_length":9}`},
		{IndexFTS, []Property{{"with_position", "TRUE"}, {"base_tokenizer", "NGram"}, {"language", "french"}, {"max_token_length", "256"},
			{"lower_case", "False"}, {"stem", "true"}, {"remove_stop_words", "false"}, {"ascii_folding", "TRUE"},
			{"ngram_min_length", "2"}, {"ngram_max_length", "2"}, {"prefix_only", "true"}},
			`{"ascii_folding":true,"base_tokenizer":"ngram","language":"French","lower_case":false,"max_token_length":256,` +
				`"ngram_max_length":2,"ngram_min_length":2,"prefix_only":true,"remove_stop_words":false,"stem":true,"with_position":true}`},
	}
	for _, c := range ok {
		got, err := CanonicalProperties(c.typ, c.props, lim)
		if err != nil || got != c.want {
			t.Errorf("%s %v:\n got %s, %v\nwant %s", c.typ, c.props, got, err, c.want)
		}
	}
	for _, lang := range ftsLanguages {
		if got, err := CanonicalProperties(IndexFTS, []Property{{"language", strings.ToUpper(lang)}}, lim); err != nil || got != `{"language":"`+lang+`"}` {
			t.Errorf("language %s: %s %v", lang, got, err)
		}
	}

	bad := []struct {
		typ   string
		props []Property
		says  string
	}{
		{IndexIVFPQ, []Property{{"metric", "hamming"}}, "l2, cosine, dot"},
		{IndexIVFRQ, []Property{{"metric", "hamming"}}, "l2, cosine, dot"},
		{IndexIVFHNSWSQ, []Property{{"metric", "hamming"}}, "l2, cosine, dot"},
		{IndexIVFHNSWPQ, []Property{{"metric", "euclid"}}, "l2, cosine, dot"},
		{IndexIVFFlat, []Property{{"metric", "jaccard"}}, "l2, cosine, dot, hamming"},
		{IndexIVFPQ, []Property{{"num_bits", "1"}}, "4 or 8"},
		{IndexIVFPQ, []Property{{"num_bits", "16"}}, "between 1 and 8"},
		{IndexIVFRQ, []Property{{"num_bits", "0"}}, "between 1 and 8"},
		{IndexIVFRQ, []Property{{"num_bits", "9"}}, "between 1 and 8"},
		{IndexIVFFlat, []Property{{"num_partitions", "4097"}}, options.OptMaxNumPartitions},
		{IndexIVFHNSWSQ, []Property{{"num_partitions", "0"}}, "between 1 and"},
		{IndexIVFHNSWPQ, []Property{{"num_sub_vectors", "257"}}, options.OptMaxNumSubVectors},
		{IndexIVFHNSWSQ, []Property{{"m", "65"}}, options.OptMaxHNSWM},
		{IndexIVFHNSWPQ, []Property{{"m", "1"}}, "between 2 and 64"},
		{IndexIVFHNSWPQ, []Property{{"ef_construction", "1001"}}, options.OptMaxHNSWEfConstruction},
		{IndexIVFRQ, []Property{{"sample_rate", "1025"}}, options.OptMaxSampleRate},
		{IndexIVFPQ, []Property{{"max_iterations", "201"}}, options.OptMaxMaxIterations},
		{IndexIVFPQ, []Property{{"max_iterations", "0"}}, "between 1 and"},
		{IndexFTS, []Property{{"max_token_length", "257"}}, options.OptMaxFTSTokenLength},
		{IndexFTS, []Property{{"ngram_max_length", "257"}}, options.OptMaxFTSTokenLength},
		{IndexFTS, []Property{{"ngram_min_length", "4"}, {"ngram_max_length", "3"}}, "more than ngram_max_length"},
		{IndexFTS, []Property{{"ngram_max_length", "2"}}, "less than the default ngram_min_length 3"},
		{IndexFTS, []Property{{"ngram_min_length", "4"}}, "more than the default ngram_max_length 3"},
		{IndexFTS, []Property{{"base_tokenizer", "jieba"}}, "simple, whitespace, raw, ngram"},
		{IndexFTS, []Property{{"language", "Klingon"}}, "English"},
		{IndexFTS, []Property{{"stem", "yes"}}, "true or false"},
		{IndexFTS, []Property{{"with_position", "1"}}, "true or false"},
		{IndexFTS, []Property{{"max_token_length", "forty"}}, "must be an integer"},
		{IndexFTS, []Property{{"metric", "l2"}}, `FTS does not take property "metric"`},
		{IndexIVFFlat, []Property{{"num_sub_vectors", "8"}}, `IVF_FLAT does not take property "num_sub_vectors"`},
		{IndexIVFHNSWSQ, []Property{{"num_sub_vectors", "8"}}, "does not take"},
		{IndexIVFPQ, []Property{{"m", "8"}}, "does not take"},
		{IndexIVFRQ, []Property{{"num_sub_vectors", "8"}}, "does not take"},
		{IndexLabelList, []Property{{"metric", "l2"}}, "LABEL_LIST takes no properties"},
		{IndexFM, []Property{{"x", "1"}}, "FM takes no properties"},
		{IndexFTS, []Property{{"stem", "true"}, {"STEM", "false"}}, "given twice"},
	}
	for _, c := range bad {
		_, err := CanonicalProperties(c.typ, c.props, lim)
		wantInvalid(t, c.typ+" "+c.props[0].Key+"="+c.props[0].Value, err, c.says)
	}
}

// Every key an option bounds is bounded at admission and again at apply
// time, by the option that bounds it; a Limits converted from the options
// carries every bound.
func TestCheckPropertyBoundsReChecksEveryBoundedKey(t *testing.T) {
	if len(boundedKeys) != 9 {
		t.Fatalf("%d bounded keys; this test names 9", len(boundedKeys))
	}
	for _, b := range boundedKeys {
		lim := Limits(options.Resolve(map[string]string{b.option: "7"}).IndexLimits())
		if got := b.max(lim); got != 7 {
			t.Errorf("%s: the options' IndexLimits do not carry %s (bound %d)", b.key, b.option, got)
		}
		at, over := `{"`+b.key+`":7}`, `{"`+b.key+`":8}`
		if err := CheckPropertyBounds(at, lim); err != nil {
			t.Errorf("%s at its bound: %v", b.key, err)
		}
		wantInvalid(t, b.key+" over its bound", CheckPropertyBounds(over, lim), b.option+" is now 7")
		wantInvalid(t, b.key+" not an integer", CheckPropertyBounds(`{"`+b.key+`":"8"}`, lim), "not an integer")
		// CanonicalProperties refuses the same value for every type taking the key.
		takers := 0
		for typ, params := range indexParams {
			for _, p := range params {
				if p.key != b.key {
					continue
				}
				takers++
				if p.kind != paramInt || p.hi != 0 {
					t.Errorf("%s of %s is not bounded by %s", p.key, typ, b.option)
				}
				_, err := CanonicalProperties(typ, []Property{{b.key, "8"}}, lim)
				wantInvalid(t, typ+" "+b.key, err, b.option)
			}
		}
		if takers == 0 {
			t.Errorf("no index type takes bounded key %s", b.key)
		}
	}
	// An integer parameter without a bounding option has a fixed range.
	for typ, params := range indexParams {
		for _, p := range params {
			bounded := false
			for _, b := range boundedKeys {
				bounded = bounded || b.key == p.key
			}
			if p.kind == paramInt && !bounded && p.hi == 0 {
				t.Errorf("%s of %s has no upper bound", p.key, typ)
			}
		}
	}
	if err := CheckPropertyBounds(`{"metric":"l2","stem":true,"language":"English"}`, Limits{}); err != nil {
		t.Errorf("unbounded keys: %v", err)
	}
	wantInvalid(t, "not an object", CheckPropertyBounds(`[1]`, defaultLimits()), "not a JSON object")
}

func TestDefaultLimitsAreTheOptionDefaults(t *testing.T) {
	lim := defaultLimits()
	for _, b := range boundedKeys {
		spec, _ := options.Lookup(b.option)
		if strconv.FormatInt(b.max(lim), 10) != spec.Default {
			t.Errorf("%s: default bound %d; option default %s", b.key, b.max(lim), spec.Default)
		}
	}
}
