package faults

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// The issue's figure "share of backend-crash cases that end UNKNOWN, by
// reason": a backend-crash case is a job whose accepted invocation was
// ended by a backend crash (the ledger's crashed), so no report exists and
// only the dataset can prove its outcome. Every schedule adds its cases
// here; a duration run prints the totals.

var crashFigures struct {
	mu      sync.Mutex
	cases   int
	unknown map[string]int // UNKNOWN crash cases by reason
	other   map[string]int // the other outcomes of crash cases
}

// unknownReason names why an UNKNOWN job is UNKNOWN, from its result alone.
func unknownReason(r *job.Record) string {
	msg := r.Result.Message
	switch {
	case r.Result.Code != job.NoTrustedResult && r.Result.Code != 0:
		return "builder code " + r.Result.Code.String()
	case strings.HasPrefix(msg, "no proof from the dataset"):
		return "the dataset gave no proof"
	case strings.Contains(msg, "no backend could read the dataset"):
		return "no backend could read the dataset"
	case strings.Contains(msg, "deadline"):
		return "execute deadline"
	case strings.Contains(msg, "bytes may have left") || strings.Contains(msg, "no status"):
		return "ambiguous send"
	}
	if len(msg) > 40 {
		msg = msg[:40] + "…"
	}
	return "other: " + msg
}

// addCrashFigures counts this schedule's backend-crash cases and returns a
// one-line account of them.
func (e *execution) addCrashFigures() string {
	l := e.w.leader()
	if l < 0 {
		return "no leader"
	}
	st := e.w.master(l).FSM().State()
	crashed := map[string]bool{}
	for name, invs := range e.w.ledger.byName() {
		for _, v := range invs {
			if v.accepted() && v.crashed {
				crashed[name] = true
			}
		}
	}
	cases, unknown, other := 0, map[string]int{}, map[string]int{}
	forJobs(st, func(r *job.Record) {
		if !crashed[r.DisplayIndexName] {
			return
		}
		cases++
		if r.MutationState == job.Unknown {
			unknown[unknownReason(r)]++
			return
		}
		k := r.MutationState.String()
		if r.Result.Reason == job.ReasonResolvedFromDataset {
			k += " (from the dataset)"
		}
		other[k]++
	})
	crashFigures.mu.Lock()
	defer crashFigures.mu.Unlock()
	if crashFigures.unknown == nil {
		crashFigures.unknown, crashFigures.other = map[string]int{}, map[string]int{}
	}
	crashFigures.cases += cases
	for k, n := range unknown {
		crashFigures.unknown[k] += n
	}
	for k, n := range other {
		crashFigures.other[k] += n
	}
	return fmt.Sprintf("backend-crash cases %d: UNKNOWN %v, other %v", cases, unknown, other)
}

// crashFigureTotals is the run's account of backend-crash cases.
func crashFigureTotals() string {
	crashFigures.mu.Lock()
	defer crashFigures.mu.Unlock()
	u := 0
	for _, n := range crashFigures.unknown {
		u += n
	}
	return fmt.Sprintf("backend-crash cases: %d, UNKNOWN %d (%s), other outcomes %s",
		crashFigures.cases, u, sortedCounts(crashFigures.unknown), sortedCounts(crashFigures.other))
}

func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
