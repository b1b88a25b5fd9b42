package faults

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// Schedule features (what a step can do). Each exists in the harness as
// written; none is approximated except where its comment says so.
const (
	stepAdmit          = "admit"            // n admissions through a random live master (the real admin API)
	stepKillLeader     = "kill-leader"      // close the leader (no transfer); restart it from its data dir later
	stepKillFollower   = "kill-follower"    // the same for a follower
	stepPauseLeader    = "pause-leader"     // the leader's raft traffic, RPC listener and backend calls freeze; resume later
	stepCrashBackend   = "crash-backend"    // builds in flight die unreported, the process closes; restart later: new epoch
	stepRefuseBackend  = "refuse-backend"   // the backend refuses every dispatch and inspect (isolation not verified)
	stepReportFaults   = "report-faults"    // reports dropped (before/after the master), duplicated, misrouted or blackholed
	stepSnapshotSave   = "snapshot-save"    // operator snapshot save through a random master
	stepSnapshotRestor = "snapshot-restore" // operator snapshot restore of the saved file (admissions after the save are rolled back)
	stepClockJump      = "clock-jump"       // every clock jumps forward (a small skew, or past the deadline + a forgetful backend's grace)
	stepReleaseHeld    = "release-held"     // held builds finish
)

// step is one scheduled action; undo steps are scheduled by the generator
// at a later index.
type step struct {
	kind string
	a, b int // parameters, by kind
	p    float64
	wait time.Duration // pause after the step
	undo int           // steps until the undo (kills, pauses, crashes, refusals, report faults)
	keep bool          // crash-backend: restart with the same outbox dir
	forg bool          // crash-backend: the restarted process forgets finished invocations fast
}

func (s step) String() string {
	var b strings.Builder
	b.WriteString(s.kind)
	switch s.kind {
	case stepAdmit:
		fmt.Fprintf(&b, " n=%d via=%d", s.a, s.b)
	case stepKillLeader, stepKillFollower, stepPauseLeader:
		fmt.Fprintf(&b, " for %d steps", s.undo)
	case stepCrashBackend:
		fmt.Fprintf(&b, " b%d for %d steps keep-outbox=%v forgetful=%v", s.a, s.undo, s.keep, s.forg)
	case stepRefuseBackend:
		fmt.Fprintf(&b, " b%d for %d steps", s.a, s.undo)
	case stepReportFaults:
		fmt.Fprintf(&b, " %s p=%.2f for %d steps", reportMode(s.a), s.p, s.undo)
	case stepClockJump:
		fmt.Fprintf(&b, " +%ds", s.a)
	case stepSnapshotSave, stepSnapshotRestor:
		fmt.Fprintf(&b, " via=%d", s.b)
	}
	fmt.Fprintf(&b, " (then %v)", s.wait)
	return b.String()
}

// generate draws a schedule of n steps from seed. The generator keeps at
// most one master unavailable (killed or paused) at a time, so a quorum is
// always there to make progress; backends may all be down or refusing.
func generate(seed int64, n int) []step {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xfa17))
	var out []step
	masterBusyUntil, saved, restored := -1, false, false
	backendBusyUntil := make([]int, nBackends)
	for i := range backendBusyUntil {
		backendBusyUntil[i] = -1
	}
	reportsBusyUntil := -1
	var forced []step // steps that must follow the one just drawn
	out = append(out, step{kind: stepAdmit, a: 2 + rng.IntN(4), b: rng.IntN(nMasters), wait: 100 * time.Millisecond})
	for i := 1; i < n; i++ {
		s := step{wait: time.Duration(100+rng.IntN(300)) * time.Millisecond}
		if len(forced) > 0 {
			s, forced = forced[0], forced[1:]
			out = append(out, s)
			continue
		}
		switch r := rng.IntN(100); {
		case r < 30:
			s.kind, s.a, s.b = stepAdmit, 2+rng.IntN(6), rng.IntN(nMasters)
		case r < 40 && i > masterBusyUntil:
			s.kind, s.undo = stepKillLeader, 1+rng.IntN(3)
			masterBusyUntil = i + s.undo
		case r < 45 && i > masterBusyUntil:
			s.kind, s.undo = stepKillFollower, 1+rng.IntN(3)
			masterBusyUntil = i + s.undo
		case r < 52 && i > masterBusyUntil:
			s.kind, s.undo = stepPauseLeader, 1+rng.IntN(3)
			masterBusyUntil = i + s.undo
		case r < 62:
			b := rng.IntN(nBackends)
			if i <= backendBusyUntil[b] {
				s.kind, s.a, s.b = stepAdmit, 1+rng.IntN(3), rng.IntN(nMasters)
				break
			}
			s.kind, s.a, s.undo, s.keep, s.forg = stepCrashBackend, b, 1+rng.IntN(3), rng.IntN(4) != 0, rng.IntN(3) == 0
			backendBusyUntil[b] = i + s.undo
		case r < 70:
			b := rng.IntN(nBackends)
			if i <= backendBusyUntil[b] {
				s.kind, s.a, s.b = stepAdmit, 1+rng.IntN(3), rng.IntN(nMasters)
				break
			}
			s.kind, s.a, s.undo = stepRefuseBackend, b, 1+rng.IntN(3)
			backendBusyUntil[b] = i + s.undo
		case r < 80 && i > reportsBusyUntil:
			s.kind, s.a, s.p, s.undo = stepReportFaults, 1+rng.IntN(5), 0.3+0.6*rng.Float64(), 1+rng.IntN(3)
			reportsBusyUntil = i + s.undo
			if reportMode(s.a) == reportsBlackhole && rng.IntN(2) == 0 {
				// A long outage while no report gets through: deadlines
				// pass, forgetful backends forget, reconcile decides.
				s.undo = 3
				reportsBusyUntil = i + s.undo
				forced = append(forced, step{kind: stepAdmit, a: 1, b: rng.IntN(nMasters), wait: 300 * time.Millisecond},
					step{kind: stepClockJump, a: deadlineSecond + 20, wait: 1500 * time.Millisecond})
			}
		case r < 84 && !saved:
			s.kind, s.b, saved = stepSnapshotSave, rng.IntN(nMasters), true
		case r < 87 && saved && !restored:
			s.kind, s.b, restored = stepSnapshotRestor, rng.IntN(nMasters), true
		case r < 93:
			s.kind, s.a = stepClockJump, 1+rng.IntN(60)
			if rng.IntN(4) == 0 {
				s.a = deadlineSecond + 20 // past every deadline, and past a forgetful backend's grace
			}
		default:
			s.kind = stepReleaseHeld
		}
		if s.kind == "" {
			s.kind, s.a, s.b = stepAdmit, 1+rng.IntN(3), rng.IntN(nMasters)
		}
		out = append(out, s)
	}
	return out
}

// admission is one admission the harness sent.
type admission struct {
	name   string
	jobID  int64 // 0 unless acknowledged
	acked  bool
	err    string
	seq    int  // order of sending
	rolled bool // sent after a snapshot save that was later restored: the operator rolled it back
}

// runner state of a schedule in flight.
type execution struct {
	w          *world
	steps      []step
	undos      map[int][]func()
	admissions []*admission
	byName     map[string]*admission
	snapshot   []byte
	savedSeq   int
	restoreAt  int // admissions seq at the restore (-1: none)
	nameSeq    int
	restored   bool
	restores   []span // when each restore call ran (world clock, ms)
	rng        *rand.Rand
}

// span is a call's start and end on the world clock (ms).
type span struct{ startMs, endMs int64 }

func newExecution(w *world, steps []step) *execution {
	return &execution{w: w, steps: steps, undos: map[int][]func(){}, byName: map[string]*admission{}, restoreAt: -1,
		rng: rand.New(rand.NewPCG(uint64(w.seed), 0xad41))}
}

func (e *execution) later(at int, f func()) { e.undos[at] = append(e.undos[at], f) }

// pickMaster prefers via; else any live, unpaused master.
func (e *execution) pickMaster(via int) int {
	w := e.w
	if w.master(via) != nil && !w.ctl.isPaused(via) {
		return via
	}
	for _, i := range w.liveMasters() {
		if !w.ctl.isPaused(i) {
			return i
		}
	}
	return via
}

func (e *execution) run() {
	w := e.w
	for i, s := range e.steps {
		for _, f := range e.undos[i] {
			f()
		}
		delete(e.undos, i)
		w.note("step %d: %s", i, s)
		e.do(i, s)
		time.Sleep(s.wait)
	}
	for i := len(e.steps); len(e.undos) > 0; i++ {
		for _, f := range e.undos[i] {
			f()
		}
		delete(e.undos, i)
	}
}

func (e *execution) admitOne(via int) {
	w := e.w
	name := fmt.Sprintf("ix%03d", e.nameSeq)
	e.nameSeq++
	table := tables[e.rng.IntN(len(tables))]
	ad := &admission{name: name, seq: e.nameSeq}
	e.admissions = append(e.admissions, ad)
	e.byName[name] = ad
	id, err := w.admit(via, table, name, 4*time.Second)
	if err != nil {
		ad.err = errSummary(err)
		w.note("  admit %s via m%d: %s", name, via, ad.err)
		return
	}
	ad.jobID, ad.acked = id, true
	w.note("  admit %s via m%d: job %d", name, via, id)
}

func errSummary(err error) string {
	var ae *adminapi.TAdminError
	if errors.As(err, &ae) {
		return "admin error " + ae.GetCode().String()
	}
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

func (e *execution) do(i int, s step) {
	w := e.w
	switch s.kind {
	case stepAdmit:
		for k := 0; k < s.a; k++ {
			e.admitOne(e.pickMaster(s.b))
		}
	case stepKillLeader, stepKillFollower:
		l := w.awaitLeader(5 * time.Second)
		victim := l
		if s.kind == stepKillFollower {
			for _, j := range w.liveMasters() {
				if j != l {
					victim = j
					break
				}
			}
		}
		if victim < 0 {
			w.note("  no master to kill")
			return
		}
		w.note("  killing m%d (leader m%d)", victim, l)
		w.killMaster(victim)
		e.later(i+s.undo, func() {
			if err := w.startMaster(victim); err != nil {
				w.note("  restart m%d failed: %v", victim, err)
				return
			}
			w.note("  restarted m%d", victim)
		})
	case stepPauseLeader:
		l := w.awaitLeader(5 * time.Second)
		if l < 0 {
			w.note("  no leader to pause")
			return
		}
		w.note("  pausing m%d", l)
		w.ctl.setPaused(l, true)
		e.later(i+s.undo, func() {
			leader := w.leader()
			w.ctl.setPaused(l, false)
			w.note("  resumed m%d (the leader while it was paused: m%d)", l, leader)
		})
	case stepCrashBackend:
		b := w.backends[s.a]
		b.crash()
		dir := b.lastDir()
		if !s.keep {
			dir = -1
		}
		e.later(i+s.undo, func() {
			if err := b.start(dir, s.forg); err != nil {
				w.note("  restart b%d failed: %v", s.a, err)
				return
			}
			w.note("  restarted b%d (epoch %d, keep-outbox=%v, forgetful=%v)", s.a, b.incarnations()[len(b.incarnations())-1].epoch, s.keep, s.forg)
		})
	case stepRefuseBackend:
		b := w.backends[s.a]
		b.refuse.Store(true)
		e.later(i+s.undo, func() { b.refuse.Store(false); w.note("  b%d accepts again", s.a) })
	case stepReportFaults:
		w.ctl.setReports(reportMode(s.a), s.p)
		e.later(i+s.undo, func() { w.ctl.setReports(reportsPass, 0); w.note("  reports pass again") })
	case stepSnapshotSave:
		via := e.pickMaster(s.b)
		file, err := w.saveSnapshot(via)
		if err != nil {
			w.note("  snapshot save via m%d: %s", via, errSummary(err))
			return
		}
		e.snapshot, e.savedSeq = file, e.nameSeq
		w.note("  saved %d bytes via m%d after %d admissions", len(file), via, e.nameSeq)
	case stepSnapshotRestor:
		if e.snapshot == nil {
			w.note("  nothing saved")
			return
		}
		via := e.pickMaster(s.b)
		start := w.clock.nowMs()
		err := w.restoreSnapshot(via, e.snapshot)
		e.restores = append(e.restores, span{start, w.clock.nowMs()})
		// Whatever the answer, the restore may have happened: every
		// admission after the save may be rolled back.
		e.restored = true
		for _, ad := range e.admissions {
			if ad.seq > e.savedSeq {
				ad.rolled = true
			}
		}
		// A restore leaves the dispatcher paused (docs/operations.md); the
		// operator looks, then resumes it a step later.
		e.later(i+1, e.resumeDispatcher)
		if err != nil {
			w.note("  snapshot restore via m%d: %s", via, errSummary(err))
			return
		}
		w.note("  restored the snapshot via m%d", via)
	case stepClockJump:
		w.clock.jump(time.Duration(s.a) * time.Second)
		w.note("  clocks now %v ahead", w.clock.offset())
	case stepReleaseHeld:
		w.releaseHeld(false)
	}
}

// resumeDispatcher is the operator's `config set
// lance_index_job_dispatcher_paused false` after a restore.
func (e *execution) resumeDispatcher() {
	w := e.w
	for attempt := 0; attempt < 20; attempt++ {
		l := w.awaitLeader(5 * time.Second)
		if l < 0 {
			continue
		}
		err := w.setOption(l, options.OptDispatcherPaused, "false")
		if err == nil {
			w.note("  operator: dispatcher resumed via m%d", l)
			return
		}
		w.note("  operator: resume dispatcher via m%d: %s", l, errSummary(err))
		time.Sleep(100 * time.Millisecond)
	}
}

// heal undoes every fault: masters resumed and restarted, backends
// restarted (same outbox) and accepting, reports passing, builds released.
func (e *execution) heal() {
	w := e.w
	w.ctl.setReports(reportsPass, 0)
	for i := 0; i < nMasters; i++ {
		w.ctl.setPaused(i, false)
	}
	for i := 0; i < nMasters; i++ {
		if w.master(i) == nil {
			if err := w.startMaster(i); err != nil {
				w.note("heal: restart m%d failed: %v", i, err)
			}
		}
	}
	for _, b := range w.backends {
		b.refuse.Store(false)
		if !b.up() {
			if err := b.start(b.lastDir(), false); err != nil {
				w.note("heal: restart b%d failed: %v", b.idx, err)
			}
		}
	}
	w.releaseHeld(true)
	if e.restored {
		e.resumeDispatcher()
	}
	w.note("healed")
}
