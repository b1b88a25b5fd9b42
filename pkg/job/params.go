package job

import (
	"sort"
	"strconv"
	"strings"
)

// The parameters of each index type (docs/index-types.md), with the
// canonical keys the builder maps onto the library's options
// (builders/lancedb). An integer is bounded either by a fixed range or, when
// it can cost a backend memory or CPU, by a cluster option (boundedKeys).

type paramKind uint8

const (
	paramInt      paramKind = iota // a JSON number
	paramBool                      // true/false, case-insensitive on input
	paramEnum                      // one of values, lowercased
	paramLanguage                  // one of ftsLanguages, spelled as the library spells it
)

type param struct {
	key    string
	kind   paramKind
	lo, hi int64    // paramInt without an option bound; hi 0: bounded by boundedKeys
	only   []int64  // paramInt: the only values allowed, when set
	values []string // paramEnum
}

var (
	metricsIVF     = []string{"l2", "cosine", "dot"}
	metricsIVFFlat = []string{"l2", "cosine", "dot", "hamming"}
)

// ftsLanguages are the stemmer and stop-word languages of tantivy, which
// Lance's FTS tokenizer uses; the library expects these spellings.
var ftsLanguages = []string{"Arabic", "Danish", "Dutch", "English", "Finnish", "French", "German", "Greek",
	"Hungarian", "Italian", "Norwegian", "Portuguese", "Romanian", "Russian", "Spanish", "Swedish", "Tamil", "Turkish"}

func metric(values []string) param { return param{key: "metric", kind: paramEnum, values: values} }

var (
	pNumPartitions  = param{key: "num_partitions", kind: paramInt, lo: 1}
	pNumSubVectors  = param{key: "num_sub_vectors", kind: paramInt, lo: 1}
	pMaxIterations  = param{key: "max_iterations", kind: paramInt, lo: 1}
	pSampleRate     = param{key: "sample_rate", kind: paramInt, lo: 1}
	pM              = param{key: "m", kind: paramInt, lo: 2} // a graph of 1 neighbour per node is no graph; the builder refuses it too
	pEfConstruction = param{key: "ef_construction", kind: paramInt, lo: 1}
)

var indexParams = map[string][]param{
	IndexIVFPQ: {metric(metricsIVF), pNumPartitions, pNumSubVectors,
		{key: "num_bits", kind: paramInt, lo: 1, hi: 8, only: []int64{4, 8}}, pMaxIterations, pSampleRate},
	IndexIVFFlat: {metric(metricsIVFFlat), pNumPartitions, pMaxIterations, pSampleRate},
	IndexIVFRQ: {metric(metricsIVF), pNumPartitions, {key: "num_bits", kind: paramInt, lo: 1, hi: 8},
		pMaxIterations, pSampleRate},
	IndexIVFHNSWSQ: {metric(metricsIVF), pNumPartitions, pMaxIterations, pSampleRate, pM, pEfConstruction},
	IndexIVFHNSWPQ: {metric(metricsIVF), pNumPartitions, pNumSubVectors, pMaxIterations, pSampleRate, pM, pEfConstruction},
	IndexBTree:     nil,
	IndexBitmap:    nil,
	IndexLabelList: nil,
	IndexFTS: {
		{key: "with_position", kind: paramBool},
		{key: "base_tokenizer", kind: paramEnum, values: []string{"simple", "whitespace", "raw", "ngram"}},
		{key: "language", kind: paramLanguage},
		{key: "max_token_length", kind: paramInt, lo: 1},
		{key: "lower_case", kind: paramBool},
		{key: "stem", kind: paramBool},
		{key: "remove_stop_words", kind: paramBool},
		{key: "ascii_folding", kind: paramBool},
		{key: "ngram_min_length", kind: paramInt, lo: 1},
		{key: "ngram_max_length", kind: paramInt, lo: 1},
		{key: "prefix_only", kind: paramBool},
	},
	IndexFM: nil,
}

// parse validates one value of p and returns its canonical JSON value.
func (p param) parse(indexType, v string, lim Limits) (any, error) {
	switch p.kind {
	case paramBool:
		switch strings.ToLower(v) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, Errorf(CodeInvalid, "%s must be true or false; got %q", p.key, truncateForError(v))
	case paramEnum:
		l := strings.ToLower(v)
		for _, x := range p.values {
			if l == x {
				return l, nil
			}
		}
		return nil, Errorf(CodeInvalid, "%s %q is not one of %s for %s", p.key, truncateForError(v), strings.Join(p.values, ", "), indexType)
	case paramLanguage:
		for _, x := range ftsLanguages {
			if strings.EqualFold(v, x) {
				return x, nil
			}
		}
		return nil, Errorf(CodeInvalid, "language %q is not one of %s", truncateForError(v), strings.Join(ftsLanguages, ", "))
	}
	hi, option := p.hi, ""
	if hi == 0 {
		for _, b := range boundedKeys {
			if b.key == p.key {
				hi, option = b.max(lim), b.option
			}
		}
	}
	n, err := parseRange(p.key, v, p.lo, hi)
	if err != nil {
		if option != "" {
			err.(*Error).Message += " (" + option + ")"
		}
		return nil, err
	}
	if len(p.only) > 0 {
		for _, x := range p.only {
			if n == x {
				return n, nil
			}
		}
		return nil, Errorf(CodeInvalid, "%s of %s must be %s", p.key, indexType, joinInts(p.only, " or "))
	}
	return n, nil
}

func paramNames(ps []param) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.key
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func joinInts(xs []int64, sep string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, sep)
}
