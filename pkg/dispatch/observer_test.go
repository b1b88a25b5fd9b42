package dispatch

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/gen-go/wire"
	"github.com/lancemaster/lancemaster/pkg/options"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

type countingObserver struct {
	mu          sync.Mutex
	rounds      int
	outcomes    map[Outcome]int
	lowerEpochs int
}

func (o *countingObserver) LowerEpoch() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lowerEpochs++
}

func (o *countingObserver) RoundDone(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d < 0 {
		panic("negative round duration")
	}
	o.rounds++
}

func (o *countingObserver) Dispatched(out Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes[out]++
}

func (o *countingObserver) get() (int, map[Outcome]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := map[Outcome]int{}
	for k, v := range o.outcomes {
		m[k] = v
	}
	return o.rounds, m
}

// The observer sees every round and one outcome per planned job, classified
// like the journal: accepted, not_enqueued, unknown, recheck_failed,
// cas_lost.
func TestObserverSeesRoundsAndOutcomes(t *testing.T) {
	obs := &countingObserver{outcomes: map[Outcome]int{}}
	var abort sync.Map // job id -> true: BeforeSend fails
	e := newEnv(t, func(d *Deps) {
		d.Observer = obs
		d.Hooks.BeforeSend = func(id int64) error {
			if _, ok := abort.Load(id); ok {
				return errors.New("aborted")
			}
			return nil
		}
	})
	e.addBackend("b1:9060", 1)
	e.setOption(options.OptMaxInflightPerBackend, "100")
	ids := e.admit(5)
	e.heartbeat()
	answers := map[int64]func(string) (*wire.TStatus, error){
		ids[0]: func(string) (*wire.TStatus, error) { return &wire.TStatus{StatusCode: wire.TStatusCode_OK}, nil },
		ids[1]: func(a string) (*wire.TStatus, error) { return nil, notSentErr(a) },
		ids[2]: func(a string) (*wire.TStatus, error) { return nil, bytesLeftErr(a) },
	}
	abort.Store(ids[3], true)
	e.be.setSubmit(func(addr string, d *wire.TLanceIndexJobDispatch) (*wire.TStatus, error) {
		return answers[d.JobID](addr)
	})
	e.prop.rewrite = func(cmd []byte) []byte {
		if raftfsm.CommandType(cmd[0]) != raftfsm.CmdMarkRunningBatch {
			return cmd
		}
		b := decodeEntry(t, cmd, journal.NewTMarkRunningBatch())
		for _, m := range b.Jobs {
			if m.JobID == ids[4] {
				m.ExpectedRev += 100 // someone moved the record first
			}
		}
		out, err := raftfsm.Encode(raftfsm.CmdMarkRunningBatch, b)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	e.round()
	rounds, got := obs.get()
	// A refusal with attempts left returns the job to PENDING (not_enqueued
	// is the refusal that uses up the last attempt: TestRefusalsExhaustAttempts).
	want := map[Outcome]int{OutcomeAccepted: 1, OutcomeReturnedToPending: 1, OutcomeUnknown: 1, OutcomeRecheckFailed: 1, OutcomeCASLost: 1}
	if rounds != 1 || len(got) != len(want) {
		t.Fatalf("rounds %d, outcomes %v", rounds, got)
	}
	for o, n := range want {
		if got[o] != n {
			t.Fatalf("outcomes %v, want %v", got, want)
		}
	}
	if len(Outcomes()) != len(want)+1 {
		t.Fatal("Outcomes() does not list every outcome")
	}
}

// A dispatcher without an observer works (the nil default).
func TestNoObserver(t *testing.T) {
	e := newEnv(t)
	e.addBackend("b1:9060", 1)
	e.admit(1)
	e.heartbeat()
	e.round()
}
