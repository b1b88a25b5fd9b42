package admin

import (
	"context"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/raftfsmtest"
)

// wideURI is a dataset with a column for every index type and a few that
// fit none.
const wideURI = "/data/lake/db/wide.lance"

func (h *harness) setWideDataset() {
	h.backend.SetDataset(wideURI, job.Snapshot{Version: 3, Fields: []job.Field{
		{ID: 0, Name: "id", Type: "int64"},
		{ID: 1, Name: "vector", Type: "fixed_size_list", ListDimension: 8, ElementType: "float32"},
		{ID: 2, Name: "vec64", Type: "fixed_size_list", ListDimension: 8, ElementType: "float64"},
		{ID: 3, Name: "bits", Type: "fixed_size_list", ListDimension: 16, ElementType: "uint8"},
		{ID: 4, Name: "text", Type: "utf8", Nullable: true},
		{ID: 5, Name: "doc", Type: "large_utf8"},
		{ID: 6, Name: "tags", Type: "list", Nullable: true, ElementType: "utf8", ElementNullable: true},
		{ID: 7, Name: "codes", Type: "large_list", ElementType: "int32"},
		{ID: 8, Name: "points", Type: "list", ElementType: "struct"},
		{ID: 9, Name: "blob", Type: "binary"},
	}})
}

// Every type is admitted with its canonical properties and a schema
// contract of the column as the snapshot shows it.
func TestAdmitEveryIndexType(t *testing.T) {
	h := newHarness(t)
	h.setWideDataset()
	h.setOption(options.OptMaxUnresolvedPerTable, "64")
	cases := []struct {
		typ, column string
		props       []string
		wantProps   string
		wantElem    string // in the contract
	}{
		{"ivf_pq", "vector", []string{"metric", "Cosine", "num_bits", "4", "max_iterations", "80", "sample_rate", "512"},
			`{"max_iterations":80,"metric":"cosine","num_bits":4,"sample_rate":512}`, `"elem":"float32"`},
		{"IVF_FLAT", "vec64", []string{"num_partitions", "16"}, `{"num_partitions":16}`, `"elem":"float64"`},
		{"IVF_FLAT", "bits", []string{"metric", "HAMMING"}, `{"metric":"hamming"}`, `"elem":"uint8"`},
		{"IVF_RQ", "vector", []string{"num_bits", "2", "metric", "dot"}, `{"metric":"dot","num_bits":2}`, `"dim":8`},
		{"ivf_hnsw_sq", "vector", []string{"m", "32", "ef_construction", "400", "num_partitions", "4"},
			`{"ef_construction":400,"m":32,"num_partitions":4}`, `"elem":"float32"`},
		{"IVF_HNSW_PQ", "vec64", []string{"m", "16", "num_sub_vectors", "4"}, `{"m":16,"num_sub_vectors":4}`, `"elem":"float64"`},
		{"btree", "id", nil, "{}", `"type":"int64"`},
		{"BITMAP", "text", nil, "{}", `"type":"utf8"`},
		{"label_list", "tags", nil, "{}", `"type":"list","nullable":true,"elem":"utf8","elem_nullable":true`},
		{"LABEL_LIST", "codes", nil, "{}", `"type":"large_list","nullable":false,"elem":"int32"`},
		{"fts", "text", []string{"base_tokenizer", "NGRAM", "language", "german", "stem", "TRUE", "ngram_min_length", "2", "ngram_max_length", "4"},
			`{"base_tokenizer":"ngram","language":"German","ngram_max_length":4,"ngram_min_length":2,"stem":true}`, `"type":"utf8"`},
		{"FM", "doc", nil, "{}", `"type":"large_utf8"`},
	}
	ctx := context.Background()
	for i, c := range cases {
		name := "ix" + string(rune('a'+i))
		resp, err := h.srv.CreateIndex(ctx, createReq("wide", name, c.column, c.typ, c.props...))
		if err != nil {
			t.Errorf("%s on %s: %v", c.typ, c.column, err)
			continue
		}
		rec, ok := h.fsm.State().Job(resp.GetJobID())
		if !ok {
			t.Fatalf("%s: job %d not journaled", c.typ, resp.GetJobID())
		}
		if rec.IndexType != strings.ToUpper(c.typ) || rec.Column != c.column || rec.PropertiesJSON != c.wantProps ||
			rec.AdmittedDatasetVersion != 3 || !strings.Contains(rec.SchemaContract, c.wantElem) {
			t.Errorf("%s on %s: journaled %s %s %s v%d %s", c.typ, c.column, rec.IndexType, rec.Column, rec.PropertiesJSON,
				rec.AdmittedDatasetVersion, rec.SchemaContract)
		}
	}
}

// Each refusal is INVALID with a message that says what is wrong, and
// journals nothing.
func TestAdmissionRefusesWhatAnIndexTypeCannotTake(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *harness)
		req   *adminapi.TCreateIndexRequest
		says  string
	}{
		{"unsupported type", nil, createReq("wide", "i", "vector", "ivf_sq"), "IVF_SQ is not supported by this backend's library"},
		{"inverted", nil, createReq("wide", "i", "text", "INVERTED"), "use FTS"},
		{"unknown type", nil, createReq("wide", "i", "text", "TRIE"), "supported: IVF_PQ, IVF_FLAT"},
		{"hamming on floats", nil, createReq("wide", "i", "vector", "IVF_FLAT", "metric", "hamming"),
			`column "vector" is fixed_size_list<float32>[8]; metric hamming needs a fixed-size list of uint8`},
		{"uint8 without hamming", nil, createReq("wide", "i", "bits", "IVF_FLAT"), "only with metric=hamming"},
		{"uint8 under IVF_PQ", nil, createReq("wide", "i", "bits", "IVF_PQ"), "is fixed_size_list<uint8>[16]; IVF_PQ needs"},
		{"hamming under HNSW", nil, createReq("wide", "i", "bits", "IVF_HNSW_SQ", "metric", "hamming"), "not one of l2, cosine, dot"},
		{"HNSW on text", nil, createReq("wide", "i", "text", "IVF_HNSW_PQ"), `column "text" is utf8; IVF_HNSW_PQ needs`},
		{"label list on a scalar", nil, createReq("wide", "i", "id", "LABEL_LIST"), `column "id" is int64; LABEL_LIST needs a list`},
		{"label list of structs", nil, createReq("wide", "i", "points", "LABEL_LIST"), "is list<struct>"},
		{"btree on a list", nil, createReq("wide", "i", "tags", "BTREE"), `column "tags" is list<utf8>; BTREE needs a scalar column`},
		{"bitmap on a large list", nil, createReq("wide", "i", "codes", "BITMAP"), "is large_list<int32>"},
		{"fts on binary", nil, createReq("wide", "i", "blob", "FTS"), `column "blob" is binary; FTS needs a utf8 or large_utf8 column`},
		{"fm on a list", nil, createReq("wide", "i", "tags", "FM"), "is list<utf8>; FM"},
		{"m over its bound", nil, createReq("wide", "i", "vector", "IVF_HNSW_SQ", "m", "65"), options.OptMaxHNSWM},
		{"m over a lowered bound", func(h *harness) { h.setOption(options.OptMaxHNSWM, "8") },
			createReq("wide", "i", "vector", "IVF_HNSW_SQ", "m", "9"), "between 2 and 8 (lance_index_max_hnsw_m)"},
		{"ef_construction over its bound", nil, createReq("wide", "i", "vector", "IVF_HNSW_PQ", "ef_construction", "5000"), options.OptMaxHNSWEfConstruction},
		{"sample_rate over its bound", nil, createReq("wide", "i", "vector", "IVF_RQ", "sample_rate", "4096"), options.OptMaxSampleRate},
		{"max_iterations over its bound", nil, createReq("wide", "i", "vector", "IVF_FLAT", "max_iterations", "1000"), options.OptMaxMaxIterations},
		{"token length over its bound", nil, createReq("wide", "i", "text", "FTS", "max_token_length", "100000"), options.OptMaxFTSTokenLength},
		{"rq bits", nil, createReq("wide", "i", "vector", "IVF_RQ", "num_bits", "9"), "between 1 and 8"},
		{"pq bits", nil, createReq("wide", "i", "vector", "IVF_PQ", "num_bits", "6"), "4 or 8"},
		{"ngram lengths crossed", nil, createReq("wide", "i", "text", "FTS", "ngram_min_length", "5", "ngram_max_length", "2"), "more than ngram_max_length"},
		{"bad tokenizer", nil, createReq("wide", "i", "text", "FTS", "base_tokenizer", "icu"), "simple, whitespace, raw, ngram"},
		{"bad language", nil, createReq("wide", "i", "text", "FTS", "language", "Latin"), "is not one of Arabic"},
		{"bad boolean", nil, createReq("wide", "i", "text", "FTS", "lower_case", "on"), "true or false"},
		{"sub-vectors not dividing the dimension", nil, createReq("wide", "i", "vec64", "IVF_HNSW_PQ", "num_sub_vectors", "3"),
			`num_sub_vectors 3 does not divide the dimension 8 of column "vec64"`},
		{"property of another type", nil, createReq("wide", "i", "vector", "IVF_FLAT", "num_sub_vectors", "4"), "IVF_FLAT does not take"},
		{"label list with properties", nil, createReq("wide", "i", "tags", "LABEL_LIST", "x", "1"), "takes no properties"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.setWideDataset()
			if c.setup != nil {
				c.setup(h)
			}
			before := h.prop.Index()
			_, err := h.srv.CreateIndex(context.Background(), c.req)
			if got := errCode(t, err); got != adminapi.TErrorCode_INVALID {
				t.Fatalf("code %s (%v); want INVALID", got, err)
			}
			if !strings.Contains(err.(*adminapi.TAdminError).Message, c.says) {
				t.Errorf("%q does not say %q", err.(*adminapi.TAdminError).Message, c.says)
			}
			if h.prop.Index() != before {
				t.Fatalf("a rejected admission journaled %d entries", h.prop.Index()-before)
			}
		})
	}
}

// lowerBeforeAdmit applies an option change just before the next admission
// entry, as a `config set` committed between the leader's validation and
// the entry's apply would.
type lowerBeforeAdmit struct {
	*raftfsmtest.Proposer
	key, value string
	done       bool
}

func (p *lowerBeforeAdmit) Propose(ctx context.Context, cmd []byte) (*journal.TApplyResponse, error) {
	if !p.done && len(cmd) > 0 && raftfsm.CommandType(cmd[0]) == raftfsm.CmdAdmitBatch {
		p.done = true
		set, err := raftfsm.Encode(raftfsm.CmdSetOption, &journal.TSetOptionCommand{NowMs: 1, Key: p.key, Value: p.value})
		if err != nil {
			return nil, err
		}
		if _, err := p.Proposer.Propose(ctx, set); err != nil {
			return nil, err
		}
	}
	return p.Proposer.Propose(ctx, cmd)
}

// §13.8 for the new bounds: the FSM refuses, at apply time, a value the
// leader validated against an option that was lowered in between.
func TestApplyRechecksTheNewBounds(t *testing.T) {
	cases := []struct {
		option, typ, column, key, value string
	}{
		{options.OptMaxHNSWM, "IVF_HNSW_SQ", "vector", "m", "32"},
		{options.OptMaxHNSWEfConstruction, "IVF_HNSW_PQ", "vector", "ef_construction", "500"},
		{options.OptMaxSampleRate, "IVF_FLAT", "vector", "sample_rate", "300"},
		{options.OptMaxMaxIterations, "IVF_RQ", "vector", "max_iterations", "100"},
		{options.OptMaxFTSTokenLength, "FTS", "text", "max_token_length", "100"},
	}
	for _, c := range cases {
		t.Run(c.option, func(t *testing.T) {
			h := newHarness(t)
			h.setWideDataset()
			h.srv.d.Proposer = &lowerBeforeAdmit{Proposer: h.prop, key: c.option, value: "10"}
			_, err := h.srv.CreateIndex(context.Background(), createReq("wide", "i", c.column, c.typ, c.key, c.value))
			if errCode(t, err) != adminapi.TErrorCode_INVALID || !strings.Contains(err.Error(), c.option+" is now 10") {
				t.Fatalf("got %v; want INVALID naming %s", err, c.option)
			}
			if h.fsm.State().LastJobID() != 0 {
				t.Fatal("the refused entry allocated a job")
			}
		})
	}
}

// IF NOT EXISTS on the new types compares what the library echoes: FTS
// reports every parameter (defaults included), HNSW its m and
// ef_construction, never num_partitions.
func TestIfNotExistsComparesEchoedParametersOfNewTypes(t *testing.T) {
	h := newHarness(t)
	h.setDataset("/data/lake/db/items.lance", 7,
		job.IndexInfo{Name: "body", IndexType: "FTS", Columns: []string{"text"}, PropertiesJSON: `{"ascii_folding":true,` +
			`"base_tokenizer":"simple","language":"German","lower_case":true,"max_token_length":40,"ngram_max_length":3,` +
			`"ngram_min_length":3,"prefix_only":false,"remove_stop_words":true,"stem":true,"with_position":false}`},
		job.IndexInfo{Name: "graph", IndexType: "IVF_HNSW_SQ", Columns: []string{"vector"}, PropertiesJSON: `{"ef_construction":300,"m":20,"metric":"l2"}`})
	yes := true
	ctx := context.Background()
	for _, r := range []*adminapi.TCreateIndexRequest{
		createReq("items", "body", "text", "fts", "language", "german", "STEM", "True"),
		createReq("items", "body", "text", "FTS"),
		createReq("items", "graph", "vector", "ivf_hnsw_sq", "m", "20", "num_partitions", "64", "sample_rate", "128"),
	} {
		r.IfNotExists = &yes
		if resp, err := h.srv.CreateIndex(ctx, r); err != nil || !resp.Noop {
			t.Errorf("%s %v: %+v %v; want a no-op", r.IndexType, r.Properties, resp, err)
		}
	}
	for _, r := range []*adminapi.TCreateIndexRequest{
		createReq("items", "body", "text", "FTS", "stem", "false"),
		createReq("items", "body", "text", "FTS", "language", "French"),
		createReq("items", "graph", "vector", "IVF_HNSW_SQ", "ef_construction", "400"),
		createReq("items", "graph", "vector", "IVF_HNSW_PQ"),
	} {
		r.IfNotExists = &yes
		if _, err := h.srv.CreateIndex(ctx, r); errCode(t, err) != adminapi.TErrorCode_DEFINITION_MISMATCH {
			t.Errorf("%s %v: %v; want DEFINITION_MISMATCH", r.IndexType, r.Properties, err)
		}
	}
}
