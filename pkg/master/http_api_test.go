package master_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"
	"github.com/lancemaster/lancemaster/pkg/rpc/rpctest"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/certs"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/httpapi"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// httpGet answers GET url: the status and the raw body.
func httpGet(t *testing.T, c *http.Client, url string) (int, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func decodeObject(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %q", b)
	}
	return m
}

// apiJobIDs are the job ids of a /v1/jobs answer, sorted.
func apiJobIDs(t *testing.T, body map[string]any) []int64 {
	t.Helper()
	var ids []int64
	for _, j := range body["jobs"].([]any) {
		ids = append(ids, int64(j.(map[string]any)["job_id"].(float64)))
	}
	slices.Sort(ids)
	return ids
}

// Three masters over loopback, jobs COMMITTED, RUNNING, PENDING and
// CANCELLED: every master answers every endpoint, says who it is and what
// it knows of the leader; a follower's consistent read sees a job admitted
// through the leader the moment before; a job's view is jobs show's, field
// for field, with its timeline; and no answer carries the storage
// credential or an invocation secret.
func TestHTTPAPIOnThreeMasters(t *testing.T) {
	creds := config.StaticCredentials{"lake-creds": {"aws_secret_access_key": storageCanary}}
	c := mastertest.NewWith(t, withHTTP(t, nil), func(int) master.Options {
		return master.Options{Credentials: creds, Knobs: &master.Knobs{HeartbeatInterval: 50 * time.Millisecond}}
	})
	w := newWorker(c)
	w.logTail = "opening s3 with aws_secret_access_key=" + storageCanary + "\n"
	l := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := func(i int, fn func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error) {
		t.Helper()
		if err := c.Client(i).Call(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	call(l, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		root, ref := "/data/lake", "lake-creds"
		if _, err := a.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root, CredentialsRef: &ref}, ""); err != nil {
			return err
		}
		if _, err := a.AddBackend(ctx, c.Backend.Addr(), ""); err != nil {
			return err
		}
		_, err := a.SetOption(ctx, options.OptEnableLocalFileMutation, "true", "")
		return err
	})
	c.Backend.SetDataset("/data/lake/db/t.lance", job.Snapshot{Version: 1, Fields: []job.Field{{ID: 0, Name: "id", Type: "int32"}}})
	committed := c.AdmitIDs(l, "lake", "t", "c", 2)
	c.WaitSettled(l, committed)
	w.setSuppress(true)
	running := c.AdmitIDs(l, "lake", "t", "r", 1)[0]
	eventually(t, 20*time.Second, "a RUNNING job", func() bool {
		r, ok := c.Masters[l].FSM().State().Job(running)
		return ok && r.MutationState == job.Running
	})
	c.SetOptions(l, map[string]string{options.OptDispatcherPaused: "true"})
	pending := c.AdmitIDs(l, "lake", "t", "p", 2)
	call(l, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) error {
		_, err := a.CancelJob(ctx, &adminapi.TCancelRequest{JobID: pending[1]})
		return err
	})
	all := append(append(append([]int64{}, committed...), running), pending...)

	// Every invocation secret the journal holds: none may appear.
	var secrets []string
	for _, id := range all {
		if r, ok := c.Masters[l].FSM().State().Job(id); ok && r.InvocationSecret != "" {
			secrets = append(secrets, r.InvocationSecret)
		}
	}
	if len(secrets) < 3 {
		t.Fatalf("only %d invocation secrets to look for", len(secrets))
	}
	scan := func(where string, b []byte) {
		t.Helper()
		for _, s := range append([]string{storageCanary, "/data/lake/db"}, secrets...) {
			if strings.Contains(string(b), s) {
				t.Fatalf("%s carries a secret or a locator (%.12s...): %s", where, s, b)
			}
		}
	}

	f := c.Follower()
	for i, m := range c.Masters {
		base := "http://" + m.HTTPAddr()
		for _, p := range []string{"/v1/jobs", "/v1/jobs?consistent", "/v1/catalogs", "/v1/backends", "/v1/backends/1",
			"/v1/options", "/v1/members", "/v1/health", "/v1/jobs?state=RUNNING", "/v1/jobs?unresolved=true", "/v1/events"} {
			status, b := httpGet(t, http.DefaultClient, base+p)
			if status != http.StatusOK {
				t.Fatalf("m%d %s: %d %s", i+1, p, status, b)
			}
			scan("m"+strconv.Itoa(i+1)+" "+p, b)
			ab := decodeObject(t, b)["answered_by"].(map[string]any)
			if ab["node_id"] != c.Nodes[i].NodeID || ab["is_leader"] != (i == l) || ab["known_leader"] != true ||
				ab["leader_id"] != c.Nodes[l].NodeID {
				t.Fatalf("m%d %s: answered_by %v", i+1, p, ab)
			}
		}
		_, b := httpGet(t, http.DefaultClient, base+"/v1/jobs?consistent")
		if got := apiJobIDs(t, decodeObject(t, b)); !slices.Equal(got, all) {
			t.Fatalf("m%d: jobs %v, want %v", i+1, got, all)
		}
		_, b = httpGet(t, http.DefaultClient, base+"/v1/jobs?state=PENDING,CANCELLED")
		if got := apiJobIDs(t, decodeObject(t, b)); !slices.Equal(got, pending) {
			t.Fatalf("m%d: pending and cancelled %v, want %v", i+1, got, pending)
		}
		for _, id := range all {
			for _, p := range []string{"?consistent", "/logs"} {
				status, b := httpGet(t, http.DefaultClient, base+"/v1/jobs/"+strconv.FormatInt(id, 10)+p)
				if status != http.StatusOK {
					t.Fatalf("m%d job %d%s: %d %s", i+1, id, p, status, b)
				}
				scan("job "+p, b)
			}
		}
	}

	// The scan of the logs proved something: the worker's tail carried the
	// credential, the answer carries it redacted.
	if _, b := httpGet(t, http.DefaultClient, "http://"+c.Masters[l].HTTPAddr()+"/v1/jobs/"+strconv.FormatInt(committed[0], 10)+"/logs"); !strings.Contains(string(b), "[redacted]") {
		t.Fatalf("the job's log is not the redacted tail: %s", b)
	}

	// A follower's consistent read: the job admitted through the leader
	// just now is there, without waiting.
	fresh := c.AdmitIDs(l, "lake", "t", "f", 1)[0]
	_, b := httpGet(t, http.DefaultClient, "http://"+c.Masters[f].HTTPAddr()+"/v1/jobs/"+strconv.FormatInt(fresh, 10)+"?consistent")
	if body := decodeObject(t, b); body["job"] == nil || body["stale_warning"] != nil {
		t.Fatalf("follower's consistent read of job %d: %s", fresh, b)
	}

	// A job's view is jobs show -o json's; its timeline says what happened.
	var show *adminapi.TJobView
	call(l, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
		show, err = a.ShowJob(ctx, committed[0], true)
		return err
	})
	want, _ := json.Marshal(show)
	_, b = httpGet(t, http.DefaultClient, "http://"+c.Masters[l].HTTPAddr()+"/v1/jobs/"+strconv.FormatInt(committed[0], 10))
	var got struct {
		Job      json.RawMessage
		Timeline []httpapi.Event
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Job) != string(want) {
		t.Fatalf("the job's view\n got %s\nwant %s", got.Job, want)
	}
	var kinds []string
	for _, e := range got.Timeline {
		kinds = append(kinds, e.Kind)
	}
	if k := strings.Join(kinds, " "); !strings.HasPrefix(k, "ADMITTED DISPATCHED ") || !strings.Contains(k, "REPORTED") ||
		!strings.Contains(k, "RESOLVED") || !strings.HasSuffix(k, "DONE") {
		t.Fatalf("timeline of a committed job: %s", k)
	}
}

// Under mutual TLS the listener serves https: /v1 and /ui answer operator
// certificates only (403 for a master's, a backend's or none), while
// /metrics, /livez and /readyz answer a scraper without a certificate.
func TestHTTPAPIUnderMutualTLS(t *testing.T) {
	pki := t.TempDir()
	if _, err := certs.WriteDevCerts(pki, certs.DevOptions{Hosts: []string{"127.0.0.1", "localhost"}, Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c := mastertest.New(t, withHTTP(t, func(n *config.Node) {
		n.TLS.CA, n.TLS.Cert, n.TLS.Key = certs.DevFiles(pki, certs.RoleMaster)
	}))
	l := c.Leader()
	addr := c.Masters[l].HTTPAddr()
	client := func(role certs.Role) *http.Client {
		cfg := rpctest.DevTLSConfig(t, pki, role).Certs.ClientConfig(addr)
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	noCert := client(certs.RoleOperator)
	noCert.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = nil
	for _, cc := range []struct {
		who    string
		c      *http.Client
		status int
	}{
		{"operator", client(certs.RoleOperator), http.StatusOK},
		{"master", client(certs.RoleMaster), http.StatusForbidden},
		{"backend", client(certs.RoleBackend), http.StatusForbidden},
		{"no certificate", noCert, http.StatusForbidden},
	} {
		for _, p := range []string{"/v1/jobs", "/v1/health", "/ui/"} {
			status, b := httpGet(t, cc.c, "https://"+addr+p)
			want := cc.status
			if p == "/ui/" && want == http.StatusOK {
				want = http.StatusNotFound // no console wired in this test
			}
			if status != want {
				t.Fatalf("%s GET %s: %d %s; want %d", cc.who, p, status, b, want)
			}
			if status == http.StatusForbidden && !strings.Contains(string(b), "PERMISSION_DENIED") {
				t.Fatalf("%s GET %s: %s", cc.who, p, b)
			}
		}
		for _, p := range []string{"/livez", "/readyz", "/metrics"} {
			if status, b := httpGet(t, cc.c, "https://"+addr+p); status != http.StatusOK {
				t.Fatalf("%s GET %s: %d %s", cc.who, p, status, b)
			}
		}
	}
	// Plain http to the TLS listener gets no answer from the API.
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/v1/jobs"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plaintext request answered on the TLS listener")
		}
	}
}
