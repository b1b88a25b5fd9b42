package admin

import (
	"context"
	"fmt"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/options"
)

// BenchmarkAdmission is one CreateIndex through the admin server: its
// checks, the inspect round trip to a fake backend over loopback Thrift,
// the group commit and the FSM's Apply (an in-process proposer, no Raft).
// It is where an admission's own CPU and allocations are measured; make
// bench's admission section adds Raft and the client's Thrift call.
func BenchmarkAdmission(b *testing.B) {
	h := newHarness(b)
	for _, k := range []string{options.OptMaxUnresolvedGlobal, options.OptMaxUnresolvedPerCatalog, options.OptMaxUnresolvedPerTable} {
		h.setOption(k, "1000000000")
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.srv.CreateIndex(ctx, createReq("items", fmt.Sprintf("i%d", i), "id", "BTREE")); err != nil {
			b.Fatal(err)
		}
	}
}
