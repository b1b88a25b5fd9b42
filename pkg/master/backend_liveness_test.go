package master_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// A backend that never answered is dead, not unknown: backends add warns
// that nothing answered, the leader lists it not alive with no LAST HEARD,
// and lancemaster_backend_alive is 0 for it (before, the series was absent
// and ALIVE "-" forever).
func TestBackendThatNeverAnsweredIsShownDead(t *testing.T) {
	addr := testkit.Addr(freePorts(t, 1)[0]) // reserved: nothing listens here

	c := mastertest.NewWith(t, withHTTP(t, nil), func(int) master.Options {
		return master.Options{Knobs: &master.Knobs{HeartbeatInterval: 50 * time.Millisecond}}
	})
	ld := c.Leader()
	var added *adminapi.TBackend
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Client(ld).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
		added, err = a.AddBackend(ctx, addr, "")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if w := added.GetWarning(); !strings.Contains(w, "nothing answered at "+addr) {
		t.Fatalf("add warning = %q", w)
	}
	eventually(t, 30*time.Second, "the leader to list the backend not alive", func() bool {
		var bs []*adminapi.TBackend
		_ = c.Client(ld).Call(ctx, func(ctx context.Context, a *adminapi.LanceMasterServiceClient) (err error) {
			bs, err = a.ListBackends(ctx)
			return err
		})
		return len(bs) == 1 && bs[0].IsSetAlive() && !bs[0].GetAlive() && !bs[0].IsSetLastHeardMs()
	})
	eventually(t, 30*time.Second, "lancemaster_backend_alive 0 on the leader", func() bool {
		_, fams := scrape(t, c.Masters[ld])
		v, ok := fams.Value("lancemaster_backend_alive", "backend_id", "1", "address", addr)
		_, heard := fams.Value("lancemaster_backend_last_heard_timestamp_seconds", "backend_id", "1", "address", addr)
		return ok && v == 0 && !heard
	})
}
