package admin

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// seenInspects is the backend client with every inspect's dataset noted
// before it is sent; started is closed at the first.
type seenInspects struct {
	rpc.BackendClient
	mu      sync.Mutex
	uris    []string
	started chan struct{}
}

func watchInspects(c rpc.BackendClient) *seenInspects {
	return &seenInspects{BackendClient: c, started: make(chan struct{})}
}

func (s *seenInspects) Inspect(ctx context.Context, addr string, req *wire.TInspectDatasetRequest) (*wire.TInspectDatasetResponse, error) {
	s.mu.Lock()
	s.uris = append(s.uris, req.DatasetURI)
	if len(s.uris) == 1 {
		close(s.started)
	}
	s.mu.Unlock()
	return s.BackendClient.Inspect(ctx, addr, req)
}

func (s *seenInspects) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.uris...)
}

// waitStarted waits, bounded, for the first inspect to be on its way.
func (s *seenInspects) waitStarted(ctx context.Context) error {
	select {
	case <-s.started:
		return nil
	case <-time.After(5 * time.Second):
		return errors.New("no inspect started while the read index was under way")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lakeWithBackend creates catalog lake at root on the leader, registers the
// fake backend and gives db.items a dataset at version 7 under root.
func (m *twoMasters) lakeWithBackend(t *testing.T, root string) {
	t.Helper()
	ctx := context.Background()
	creds := "lake-creds"
	if _, err := m.leader.CreateCatalog(ctx, &adminapi.TCatalog{Name: "lake", RootURI: &root, CredentialsRef: &creds}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := m.leader.AddBackend(ctx, m.backend.Addr(), ""); err != nil {
		t.Fatal(err)
	}
	(&harness{backend: m.backend}).setDataset(root+"/db/items.lance", 7)
}

// §5 step 3 runs beside §13.8's read index: the leader's read index here
// returns only once the inspect is on its way, so an admission that
// inspected after its read index would fail; one inspect serves it.
func TestAdmissionInspectsBesideTheReadIndex(t *testing.T) {
	m := newTwoMasters(t)
	m.lakeWithBackend(t, "/data/lake")
	seen := watchInspects(m.leader.d.Backends)
	m.leader.d.Backends = seen
	index := m.leader.d.ReadIndex
	m.leader.d.ReadIndex = func(ctx context.Context) (uint64, error) {
		if err := seen.waitStarted(ctx); err != nil {
			return 0, err
		}
		return index(ctx)
	}
	resp, err := m.leader.CreateIndex(context.Background(), createReq("items", "v", "vector", "IVF_PQ"))
	if err != nil {
		t.Fatalf("admission: %v", err)
	}
	rec, ok := m.log.FSM.State().Job(resp.GetJobID())
	if !ok || rec.AdmittedDatasetVersion != 7 {
		t.Fatalf("admitted %+v, want the dataset's version 7", rec)
	}
	if got := seen.seen(); len(got) != 1 {
		t.Fatalf("inspects %v, want exactly one", got)
	}
}

// The early inspect asks what this replica's state said before the read
// index: when the current state asks another question (here the catalog's
// root moved, and a follower learns it only by catching up), its answer is
// dropped and the dataset the current state names is inspected.
func TestAdmissionInspectsAgainWhenTheCurrentStateAsksOtherwise(t *testing.T) {
	m := newTwoMasters(t)
	m.lakeWithBackend(t, "/data/lake")
	m.log.replay(m.local) // the follower knows root /data/lake
	moved := "/data/lake2"
	if _, err := m.leader.UpdateCatalog(context.Background(), &adminapi.TUpdateCatalogRequest{Name: "lake", RootURI: &moved}); err != nil {
		t.Fatal(err)
	}
	(&harness{backend: m.backend}).setDataset(moved+"/db/items.lance", 9)

	seen := watchInspects(m.follower.d.Backends)
	m.follower.d.Backends = seen
	// The follower catches up once the early inspect is on its way (and
	// then keeps up, to read its own write back).
	defer m.replayFrom(seen.started)()
	resp, err := m.follower.CreateIndex(context.Background(), createReq("items", "v", "vector", "IVF_PQ"))
	if err != nil {
		t.Fatalf("admission: %v", err)
	}
	rec, ok := m.log.FSM.State().Job(resp.GetJobID())
	if !ok || rec.Locator != moved+"/db/items.lance" || rec.AdmittedDatasetVersion != 9 {
		t.Fatalf("admitted %+v, want %s/db/items.lance at version 9", rec, moved)
	}
	got := seen.seen()
	if len(got) != 2 || got[0] != "/data/lake/db/items.lance" || got[1] != moved+"/db/items.lance" {
		t.Fatalf("inspects %v, want the stale root's early one, then the current root's", got)
	}
}
