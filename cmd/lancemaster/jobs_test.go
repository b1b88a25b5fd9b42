package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

func TestCreateIndexSendsPropertiesInOrderWithDuplicates(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{admit: &adminapi.TAdmitResponse{JobID: thrift.Int64Ptr(7)}}
	addr := serve(t, f)

	out := mustOK(t)(cli(t, addr, "--as", "bob", "jobs", "create-index", "lake.sales.items", "Emb_Idx",
		"--column", "embedding", "--type", "ivf_pq",
		"--property", "metric=l2", "--property", "num_partitions=256", "--property", "metric=cosine",
		"--property", "note=a,b=c", "--replace"))
	if out != "job 7 admitted\n" {
		t.Errorf("stdout = %q", out)
	}
	got := f.onlyCall(t, "CreateIndex").(*adminapi.TCreateIndexRequest)
	want := &adminapi.TCreateIndexRequest{
		Catalog: "lake", Db: "sales", Table: "items", IndexName: "Emb_Idx",
		Column: "embedding", IndexType: "IVF_PQ",
		Properties: []*adminapi.TProperty{
			{Key: "metric", Value: "l2"}, {Key: "num_partitions", Value: "256"},
			{Key: "metric", Value: "cosine"}, {Key: "note", Value: "a,b=c"},
		},
		Replace: thrift.BoolPtr(true),
		Creator: thrift.StringPtr("bob"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request = %s\nwant      %s", got, want)
	}
}

func TestCreateIndexJSONAndDefaults(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{admit: &adminapi.TAdmitResponse{JobID: thrift.Int64Ptr(9)}}
	addr := serve(t, f)

	out := mustOK(t)(cli(t, addr, "-o", "json", "jobs", "create-index", "c.d.t", "i", "--column", "k", "--type", "BTREE", "--if-not-exists"))
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, map[string]any{"job_id": 9.0, "noop": false}) {
		t.Errorf("json = %v", got)
	}
	req := f.onlyCall(t, "CreateIndex").(*adminapi.TCreateIndexRequest)
	if req.Properties != nil || req.IsSetReplace() || !req.GetIfNotExists() || req.GetCreator() != "alice" {
		t.Errorf("request = %s", req)
	}
}

func TestDropIndexNoop(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{admit: &adminapi.TAdmitResponse{Noop: true, Message: thrift.StringPtr("index i does not exist")}}
	addr := serve(t, f)

	out := mustOK(t)(cli(t, addr, "jobs", "drop-index", "c.d.t", "i", "--if-exists"))
	if out != "no-op: index i does not exist\n" {
		t.Errorf("stdout = %q", out)
	}
	req := f.onlyCall(t, "DropIndex").(*adminapi.TDropIndexRequest)
	want := &adminapi.TDropIndexRequest{Catalog: "c", Db: "d", Table: "t", IndexName: "i",
		IfExists: thrift.BoolPtr(true), Creator: thrift.StringPtr("alice")}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("request = %s", req)
	}
}

func TestUsageErrorsSendNothing(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{admit: &adminapi.TAdmitResponse{JobID: thrift.Int64Ptr(1)}}
	addr := serve(t, f)
	create := []string{"jobs", "create-index", "c.d.t", "i", "--column", "v", "--type", "IVF_PQ"}
	cases := map[string][]string{
		"property without =":    append(create, "--property", "metric"),
		"property without key":  append(create, "--property", "=l2"),
		"table with two parts":  {"jobs", "create-index", "c.d", "i", "--column", "v", "--type", "BTREE"},
		"table with four parts": {"jobs", "drop-index", "c.d.t.x", "i"},
		"table with empty part": {"jobs", "drop-index", "c..t", "i"},
		"empty index":           {"jobs", "drop-index", "c.d.t", " "},
		"missing column":        {"jobs", "create-index", "c.d.t", "i", "--type", "BTREE"},
		"empty column":          {"jobs", "create-index", "c.d.t", "i", "--type", "BTREE", "--column", ""},
		"missing comment":       {"jobs", "resolve", "5", "--force-release"},
		"empty comment":         {"jobs", "resolve", "5", "--force-release", "--comment", "  "},
		"missing force-release": {"jobs", "resolve", "5", "--comment", "gone"},
		"force-release=false":   {"jobs", "resolve", "5", "--force-release=false", "--comment", "gone"},
		"job id not a number":   {"jobs", "show", "x"},
		"job id zero":           {"jobs", "cancel", "0"},
		"limit zero":            {"jobs", "list", "--limit", "0"},
		"extra argument":        {"jobs", "list", "extra"},
		"unknown flag":          {"jobs", "list", "--bogus"},
		"unknown command":       {"jobs", "bogus"},
		"unknown root command":  {"bogus"},
		"bad output":            {"-o", "xml", "jobs", "list"},
		"update without flags":  {"catalogs", "update", "lake"},
		"create without root":   {"catalogs", "create", "lake"},
		"backend without port":  {"backends", "add", "10.0.0.1"},
		"backend bad port":      {"backends", "add", "10.0.0.1:99999"},
		"remove bad backend":    {"backends", "remove", "not an address"},
		"transfer to nobody":    {"operator", "raft", "transfer-leader", "--to", ""},
		"no address":            {"--address", " , ", "jobs", "list"},
	}
	for name, args := range cases {
		out, errOut, code := cli(t, addr, args...)
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d (stdout %q, stderr %q)", name, code, exitUsage, out, errOut)
			continue
		}
		if !strings.HasPrefix(errOut, "Error: ") || !strings.Contains(errOut, "--help' for usage.") {
			t.Errorf("%s: stderr = %q", name, errOut)
		}
	}
	if calls := f.recordedCalls(); len(calls) != 0 {
		t.Errorf("usage errors sent %d requests: %+v", len(calls), calls)
	}
}

func TestAdminErrorIsReportedByCode(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{err: &adminapi.TAdminError{
		Code:    adminapi.TErrorCode_FENCE_CONFLICT,
		Message: "index emb_idx is fenced by unresolved job 12; resolve it first\n(see jobs show 12)",
		JobID:   thrift.Int64Ptr(12),
	}}
	addr := serve(t, f)

	out, errOut, code := cli(t, addr, "jobs", "create-index", "c.d.t", "emb_idx", "--column", "v", "--type", "IVF_PQ")
	if code != exitError {
		t.Fatalf("exit %d, want %d", code, exitError)
	}
	if out != "" {
		t.Errorf("stdout = %q", out)
	}
	want := "Error: FENCE_CONFLICT: index emb_idx is fenced by unresolved job 12; resolve it first (see jobs show 12)\n"
	if errOut != want {
		t.Errorf("stderr = %q\nwant     %q", errOut, want)
	}
}

func testJobs() []*adminapi.TJobView {
	return []*adminapi.TJobView{
		{
			JobID: 1, Catalog: thrift.StringPtr("lake"), Db: thrift.StringPtr("sales"), Table: thrift.StringPtr("items"),
			IndexName: thrift.StringPtr("emb_idx"), IndexType: thrift.StringPtr("IVF_PQ"),
			MutationType: thrift.StringPtr("CREATE"), MutationState: thrift.StringPtr("RUNNING"),
			RefreshState: thrift.StringPtr("NOT_REQUIRED"), BackendID: thrift.Int64Ptr(3),
			CreateTimeMs: thrift.Int64Ptr(1699990000000), UpdateTimeMs: thrift.Int64Ptr(1700000000000),
		},
		{
			JobID: 2, Catalog: thrift.StringPtr("lake"), Db: thrift.StringPtr("sales"), Table: thrift.StringPtr("items"),
			IndexName: thrift.StringPtr("old_idx"), MutationType: thrift.StringPtr("DROP"),
			MutationState: thrift.StringPtr("UNKNOWN"), RefreshState: thrift.StringPtr("NOT_REQUIRED"),
			ForceReleased: thrift.BoolPtr(true),
		},
	}
}

func TestJobsListTable(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{pages: map[int64]*adminapi.TListJobsResponse{
		0: {Jobs: testJobs(), NextBeforeJobID: thrift.Int64Ptr(2)},
	}}
	addr := serve(t, f)

	out, errOut, code := cli(t, addr, "jobs", "list", "--catalog", "lake", "--state", "running", "--limit", "2", "--consistent")
	mustOK(t)(out, errOut, code)
	want := "" +
		"ID  CATALOG  DB.TABLE     INDEX    TYPE    MUTATION  STATE               REFRESH       BACKEND  AGE    UPDATED\n" +
		"1   lake     sales.items  emb_idx  IVF_PQ  CREATE    RUNNING             NOT_REQUIRED  3        6h11m  3h25m\n" +
		"2   lake     sales.items  old_idx  -       DROP      UNKNOWN (released)  NOT_REQUIRED  -        -      -\n"
	if out != want {
		t.Errorf("stdout =\n%s\nwant\n%s", out, want)
	}
	if errOut != "more jobs match: use --all, or --cursor 2 for the next page\n" {
		t.Errorf("stderr = %q, want the paging hint", errOut)
	}
	req := f.onlyCall(t, "ListJobs").(*adminapi.TListJobsRequest)
	want2 := &adminapi.TListJobsRequest{Catalog: thrift.StringPtr("lake"), State: thrift.StringPtr("RUNNING"),
		Limit: thrift.Int32Ptr(2), Consistent: thrift.BoolPtr(true), OldestFirst: thrift.BoolPtr(false)}
	if !reflect.DeepEqual(req, want2) {
		t.Errorf("request = %s", req)
	}
	// --verbose: exact times instead of ages.
	out = mustOK(t)(cli(t, addr, "--verbose", "jobs", "list"))
	if !strings.Contains(out, "  2023-11-14T19:26:40.000Z  2023-11-14T22:13:20.000Z\n") {
		t.Errorf("--verbose:\n%s", out)
	}
}

func TestJobsListAllFollowsPagesAsJSON(t *testing.T) {
	t.Parallel()
	jobs := testJobs()
	f := &fakeMaster{pages: map[int64]*adminapi.TListJobsResponse{
		0: {Jobs: jobs[1:], NextBeforeJobID: thrift.Int64Ptr(2)},
		2: {Jobs: jobs[:1]},
	}}
	addr := serve(t, f)

	out := mustOK(t)(cli(t, addr, "-o", "json", "jobs", "list", "--all", "--limit", "1"))
	var got struct {
		Jobs       []map[string]any `json:"jobs"`
		NextCursor *string          `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, out)
	}
	if len(got.Jobs) != 2 || got.Jobs[0]["job_id"] != 2.0 || got.Jobs[1]["job_id"] != 1.0 || got.NextCursor != nil ||
		got.Jobs[1]["mutation_state"] != "RUNNING" || got.Jobs[0]["force_released"] != true || got.Jobs[1]["update_time_ms"] != 1700000000000.0 {
		t.Errorf("json = %s", out)
	}
	calls := f.recordedCalls()
	if len(calls) != 2 {
		t.Fatalf("calls = %+v, want 2 pages", calls)
	}
	if a := calls[0].req.(*adminapi.TListJobsRequest); a.IsSetAfterJobID() || a.IsSetBeforeJobID() || a.GetOldestFirst() {
		t.Errorf("first page request = %s", a)
	}
	if a := calls[1].req.(*adminapi.TListJobsRequest); a.GetBeforeJobID() != 2 || a.IsSetAfterJobID() || a.GetLimit() != 1 {
		t.Errorf("second page request = %s", a)
	}
}

func TestJobsListEmptyJSONIsAnObject(t *testing.T) {
	t.Parallel()
	addr := serve(t, &fakeMaster{})
	if out := mustOK(t)(cli(t, addr, "-o", "json", "jobs", "list")); out != "{\n  \"jobs\": []\n}\n" {
		t.Errorf("stdout = %q", out)
	}
}

func TestJobsShow(t *testing.T) {
	t.Parallel()
	view := &adminapi.TJobView{
		JobID: 42, Creator: thrift.StringPtr("alice"), Rev: thrift.Int64Ptr(3),
		CreateTimeMs: thrift.Int64Ptr(1700000000123), Catalog: thrift.StringPtr("lake"),
		IndexName: thrift.StringPtr("emb_idx"), MutationState: thrift.StringPtr("UNKNOWN"),
		ResultMessage: thrift.StringPtr("line one\nline two\x1b[31m"), HoldsSlot: thrift.BoolPtr(false),
		DeadlineMs: thrift.Int64Ptr(1700000003600), Provider: thrift.StringPtr("DIRECTORY"),
	}
	f := &fakeMaster{job: view}
	addr := serve(t, f)

	out := mustOK(t)(cli(t, addr, "jobs", "show", "42", "--consistent"))
	want := "" +
		"job_id:         42\n" +
		"creator:        alice\n" +
		"rev:            3\n" +
		"create_time:    2023-11-14T22:13:20.123Z\n" +
		"catalog:        lake\n" +
		"index_name:     emb_idx\n" +
		"mutation_state: UNKNOWN\n" +
		"result_message: line one line two [31m\n" +
		"deadline:       2023-11-14T22:13:23.600Z\n" +
		"holds_slot:     false\n" +
		"provider:       DIRECTORY\n"
	if out != want {
		t.Errorf("stdout =\n%s\nwant\n%s", out, want)
	}
	if got := f.onlyCall(t, "ShowJob").([2]any); got != [2]any{int64(42), true} {
		t.Errorf("request = %v", got)
	}

	out = mustOK(t)(cli(t, addr, "-o", "json", "jobs", "show", "42"))
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if got["job_id"] != 42.0 || got["holds_slot"] != false || got["deadline_ms"] != 1700000003600.0 || len(got) != 11 {
		t.Errorf("json = %v", got)
	}
}

// TestJobViewCarriesNoSecrets is a tripwire: jobs show prints every field
// of the view, which must never hold a locator or a secret (DESIGN.md §2).
func TestJobViewCarriesNoSecrets(t *testing.T) {
	t.Parallel()
	rt := reflect.TypeOf(adminapi.TJobView{})
	for i := 0; i < rt.NumField(); i++ {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if isHiddenJobField(name) {
			t.Errorf("TJobView has field %q: jobs show hides it, but JSON output would not", name)
		}
	}
}

func TestJobsResolve(t *testing.T) {
	t.Parallel()
	released := &adminapi.TJobView{JobID: 5, MutationState: thrift.StringPtr("UNKNOWN"),
		ForceReleased: thrift.BoolPtr(true), ForceWarning: thrift.StringPtr("the old worker may still change the index")}
	f := &fakeMaster{resolve: &adminapi.TResolveResponse{Job: released}}
	addr := serve(t, f)

	out, errOut, code := cli(t, addr, "jobs", "resolve", "5", "--force-release", "--comment", " be3 wiped ")
	mustOK(t)(out, errOut, code)
	if out != "job 5 force-released\n" || errOut != "Warning: the old worker may still change the index\n" {
		t.Errorf("stdout = %q, stderr = %q", out, errOut)
	}
	req := f.onlyCall(t, "ResolveJob").(*adminapi.TResolveRequest)
	want := &adminapi.TResolveRequest{JobID: 5, ForceRelease: true, Comment: "be3 wiped", Actor: thrift.StringPtr("alice")}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("request = %s", req)
	}

	f2 := &fakeMaster{resolve: &adminapi.TResolveResponse{Job: released, AlreadyReleased: true}}
	addr2 := serve(t, f2)
	out = mustOK(t)(cli(t, addr2, "jobs", "resolve", "5", "--force-release", "--comment", "retry"))
	if out != "job 5 was already force-released; nothing changed\n" {
		t.Errorf("stdout = %q", out)
	}
	out = mustOK(t)(cli(t, addr2, "-o", "json", "jobs", "resolve", "5", "--force-release", "--comment", "retry"))
	if !strings.Contains(out, `"already_released": true`) || !strings.Contains(out, `"force_released": true`) {
		t.Errorf("json = %s", out)
	}
}

func TestJobsCancel(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{job: &adminapi.TJobView{JobID: 8, MutationState: thrift.StringPtr("CANCELLED")}}
	addr := serve(t, f)

	out := mustOK(t)(cli(t, addr, "--as", "ops", "jobs", "cancel", "8"))
	if out != "job 8 cancelled (state CANCELLED)\n" {
		t.Errorf("stdout = %q", out)
	}
	req := f.onlyCall(t, "CancelJob").(*adminapi.TCancelRequest)
	if req.JobID != 8 || req.GetActor() != "ops" {
		t.Errorf("request = %s", req)
	}
}

// --unresolved asks the master for the jobs that still need someone: the
// runbook's list after a force-release no longer shows the released job.
func TestJobsListUnresolvedIsSent(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{}
	addr := serve(t, f)
	mustOK(t)(cli(t, addr, "jobs", "list", "--state", "UNKNOWN", "--unresolved"))
	req := f.onlyCall(t, "ListJobs").(*adminapi.TListJobsRequest)
	if !req.GetUnresolved() || req.GetState() != "UNKNOWN" {
		t.Errorf("request = %s", req)
	}
}

// --held asks the master for the jobs a restore held, and checks the answer
// again: a master older than the filter ignores it and answers every job.
func TestJobsListHeldIsSentAndCheckedAgain(t *testing.T) {
	t.Parallel()
	jobs := testJobs()
	jobs[1].RestoreHold = thrift.BoolPtr(true)
	f := &fakeMaster{pages: map[int64]*adminapi.TListJobsResponse{0: {Jobs: jobs}}}
	addr := serve(t, f)
	out := mustOK(t)(cli(t, addr, "-o", "json", "jobs", "list", "--held"))
	req := f.onlyCall(t, "ListJobs").(*adminapi.TListJobsRequest)
	if !req.GetHeld() {
		t.Errorf("request = %s", req)
	}
	if !strings.Contains(out, `"job_id": 2`) || strings.Contains(out, `"job_id": 1`) {
		t.Errorf("--held lists %s", out)
	}
}

// A master's stale-read warning reaches stderr once; stdout keeps the table.
func TestJobsListPrintsTheStaleWarningOnStderr(t *testing.T) {
	t.Parallel()
	f := &fakeMaster{pages: map[int64]*adminapi.TListJobsResponse{
		0: {Jobs: testJobs(), StaleWarning: thrift.StringPtr("master m2 knows no leader")},
	}}
	addr := serve(t, f)
	out, errOut, code := cli(t, addr, "jobs", "list")
	mustOK(t)(out, errOut, code)
	if strings.Count(errOut, "warning: master m2 knows no leader\n") != 1 || strings.Contains(out, "knows no leader") {
		t.Errorf("stdout = %q, stderr = %q", out, errOut)
	}
	// -o json carries it too, as GET /v1/jobs does.
	if out := mustOK(t)(cli(t, addr, "-o", "json", "jobs", "list")); !strings.Contains(out, `"stale_warning": "master m2 knows no leader"`) {
		t.Errorf("-o json = %s", out)
	}
}
