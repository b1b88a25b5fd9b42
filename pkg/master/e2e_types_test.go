package master_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// indexCase is one index kind built end to end: its column in the
// make-dataset.js --extra dataset and the properties small data allows.
type indexCase struct {
	name, column, typ string
	props             map[string]string
}

var everyIndexType = []indexCase{
	{"v_ivfpq", "vector", "IVF_PQ", map[string]string{"num_partitions": "2", "num_sub_vectors": "2", "num_bits": "4"}},
	{"v_ivfflat", "vector", "IVF_FLAT", map[string]string{"metric": "cosine", "num_partitions": "2"}},
	{"b_hamming", "bits", "IVF_FLAT", map[string]string{"metric": "hamming", "num_partitions": "2"}},
	{"v_ivfrq", "vector", "IVF_RQ", map[string]string{"num_partitions": "2"}},
	{"v_hnswsq", "vector", "IVF_HNSW_SQ", map[string]string{"num_partitions": "1", "m": "8", "ef_construction": "40"}},
	{"v_hnswpq", "vector", "IVF_HNSW_PQ", map[string]string{"num_partitions": "1", "num_sub_vectors": "2", "m": "8", "ef_construction": "40"}},
	{"id_btree", "id", "BTREE", nil},
	{"id_bitmap", "id", "BITMAP", nil},
	{"labels_ll", "labels", "LABEL_LIST", nil},
	{"text_fts", "text", "FTS", map[string]string{"base_tokenizer": "simple", "lower_case": "true", "stem": "true", "language": "english"}},
	{"text_fm", "text", "FM", nil},
}

// Every index type the builder supports, through the masters, a real
// backend process and the real builder: CREATE → COMMITTED/DONE with the
// verified uuid, inspect lists it with its type, REPLACE → a new uuid, DROP →
// gone. And the admission refusals, typed, with nothing journaled.
func TestEndToEndEveryIndexType(t *testing.T) {
	r := newEvidenceRig(t)
	args := []string{filepath.Join(r.builder, "make-dataset.js"), filepath.Join(r.lake, "db"), "items",
		"--rows", "2000", "--dim", "16", "--extra", "--overwrite"}
	if out, err := exec.Command("node", args...).CombinedOutput(); err != nil {
		t.Fatalf("make-dataset --extra: %v\n%s", err, out)
	}
	r.call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.SetOption(ctx, options.OptMaxUnresolvedPerTable, "64", "")
		return err
	})
	create := func(c indexCase, replace bool) int64 {
		req := &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: c.name,
			Column: c.column, IndexType: c.typ, Replace: &replace}
		for k, v := range c.props {
			req.Properties = append(req.Properties, &adminapi.TProperty{Key: k, Value: v})
		}
		return r.admit(func(a *adminapi.LanceMasterServiceClient, ctx context.Context) (*adminapi.TAdmitResponse, error) {
			return a.CreateIndex(ctx, req)
		})
	}
	settle := func(id int64, what string) *job.Record {
		return r.waitJob(id, what, func(j *job.Record) bool { return j.MutationState.IsOutcome() && !j.Unresolved() })
	}
	inspect := func() map[string]*adminapiIndex {
		out := map[string]*adminapiIndex{}
		r.call(func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
			view, err := a.InspectDataset(ctx, "lake", "db", "items")
			for _, ix := range view.GetIndexes() {
				out[ix.Name] = &adminapiIndex{typ: ix.IndexType, uuid: ix.GetIndexUUID()}
			}
			return err
		})
		return out
	}

	created := map[string]string{}
	ids := map[string]int64{}
	for _, c := range everyIndexType {
		ids[c.name] = create(c, false)
	}
	for _, c := range everyIndexType {
		rec := settle(ids[c.name], c.name+" CREATE to settle")
		if rec.MutationState != job.Committed || rec.RefreshState != job.RefreshDone || rec.IndexUUID == "" {
			t.Fatalf("%s CREATE: %s/%s %s %q uuid %q", c.name, rec.MutationState, rec.RefreshState, rec.Result.Code, rec.Result.Message, rec.IndexUUID)
		}
		created[c.name] = rec.IndexUUID
	}
	seen := inspect()
	for _, c := range everyIndexType {
		ix := seen[c.name]
		if ix == nil || ix.typ != c.typ || ix.uuid != created[c.name] {
			t.Errorf("inspect of %s: %+v, want type %s uuid %s", c.name, ix, c.typ, created[c.name])
		}
	}
	for _, c := range everyIndexType {
		ids[c.name] = create(c, true)
	}
	for _, c := range everyIndexType {
		rec := settle(ids[c.name], c.name+" REPLACE to settle")
		if rec.MutationState != job.Committed || rec.IndexUUID == "" || rec.IndexUUID == created[c.name] ||
			rec.AdmittedIndexUUID != created[c.name] {
			t.Fatalf("%s REPLACE: %s %q uuid %q (was %q, admitted %q)", c.name, rec.MutationState, rec.Result.Message,
				rec.IndexUUID, created[c.name], rec.AdmittedIndexUUID)
		}
	}
	for _, c := range everyIndexType {
		ids[c.name] = r.drop(c.name)
	}
	for _, c := range everyIndexType {
		if rec := settle(ids[c.name], c.name+" DROP to settle"); rec.MutationState != job.Committed {
			t.Fatalf("%s DROP: %s %q", c.name, rec.MutationState, rec.Result.Message)
		}
	}
	if left := inspect(); len(left) != 0 {
		t.Fatalf("indexes left after the drops: %v", left)
	}

	// Refused at admission, typed, nothing journaled.
	before := r.c.Masters[r.l].FSM().State().AppliedIndex()
	for _, bad := range []struct {
		c    indexCase
		code adminapi.TErrorCode
	}{
		{indexCase{"bad_col", "text", "IVF_PQ", nil}, adminapi.TErrorCode_INVALID},                                        // wrong column type
		{indexCase{"bad_ham", "vector", "IVF_FLAT", map[string]string{"metric": "hamming"}}, adminapi.TErrorCode_INVALID}, // hamming needs uint8
		{indexCase{"bad_m", "vector", "IVF_HNSW_SQ", map[string]string{"m": "0"}}, adminapi.TErrorCode_INVALID},           // bad parameter
		{indexCase{"bad_ll", "id", "LABEL_LIST", nil}, adminapi.TErrorCode_INVALID},                                       // not a list
		{indexCase{"bad_sq", "vector", "IVF_SQ", nil}, adminapi.TErrorCode_INVALID},                                       // not supported here
		{indexCase{"bad_ng", "text", "NGRAM", nil}, adminapi.TErrorCode_INVALID},
	} {
		req := &adminapi.TCreateIndexRequest{Catalog: "lake", Db: "db", Table: "items", IndexName: bad.c.name,
			Column: bad.c.column, IndexType: bad.c.typ}
		for k, v := range bad.c.props {
			req.Properties = append(req.Properties, &adminapi.TProperty{Key: k, Value: v})
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := r.c.Client(r.l).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
			_, err := a.CreateIndex(ctx, req)
			return err
		})
		cancel()
		if got := errCode(t, err); got != bad.code {
			t.Errorf("%s %s on %s: %v (code %v), want %v", bad.c.name, bad.c.typ, bad.c.column, err, got, bad.code)
		}
	}
	if after := r.c.Masters[r.l].FSM().State().AppliedIndex(); after != before {
		t.Errorf("refused admissions journaled %d entries", after-before)
	}
}

type adminapiIndex struct{ typ, uuid string }
