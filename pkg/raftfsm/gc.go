package raftfsm

import (
	"github.com/lancemaster/lancemaster/gen-go/journal"
)

// Retention GC (DESIGN.md §9). The leader picks candidates with
// State.GCEligible; the FSM re-checks each one against the entry's own
// cutoff, because the record may have changed between the pick and the
// apply. An unresolved record or a slot holder is never removed.

// MaxGCBatch bounds the ids of one GC entry.
const MaxGCBatch = 1024

func init() {
	register(CommandSpec{Type: CmdGC, Name: "gc", Forward: ForwardNever, Wake: WakeNever}, journal.NewTGCCommand, applyGC)
}

func applyGC(t *tx, c *journal.TGCCommand) (*journal.TApplyResponse, error) {
	if len(c.JobIds) > MaxGCBatch {
		return respFail(journal.TApplyCode_INVALID, "a GC entry names %d jobs; at most %d are allowed", len(c.JobIds), MaxGCBatch), nil
	}
	items := make([]*journal.TItemResult_, 0, len(c.JobIds))
	for _, id := range c.JobIds {
		r := t.job(id)
		switch {
		case r == nil:
			items = append(items, itemFail(id, journal.TApplyCode_NOT_FOUND, "job %d does not exist", id))
		case r.Unresolved():
			items = append(items, itemFail(id, journal.TApplyCode_CAS_FAILED, "job %d is unresolved", id))
		case r.HoldsPossibleLiveSlot():
			items = append(items, itemFail(id, journal.TApplyCode_CAS_FAILED, "job %d holds a possible-live slot", id))
		case r.UpdateTimeMs >= c.CutoffMs:
			items = append(items, itemFail(id, journal.TApplyCode_CAS_FAILED, "job %d was updated after the cutoff", id))
		default:
			if err := t.remove(r); err != nil {
				return nil, err
			}
			items = append(items, itemOK(id))
		}
	}
	return respItems(items), nil
}
