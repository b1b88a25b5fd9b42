package raftfsm

import (
	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/job"
	"github.com/lancemaster/lancemaster/pkg/raftfsm/jobcodec"
)

// What a report says about the build beside its outcome (docs/cli.md, jobs
// show): the worker's resources and log tail, and the index directory a
// build that did not commit left behind.

// checkEvidence bounds a report item's uuids and log tail.
func checkEvidence(indexUUID, leftoverUUID, logTail string) error {
	if err := job.CheckBytes("index uuid", indexUUID, job.MaxIndexUUIDBytes); err != nil {
		return err
	}
	if err := job.CheckBytes("leftover index uuid", leftoverUUID, job.MaxIndexUUIDBytes); err != nil {
		return err
	}
	return job.CheckBytes("log tail", logTail, job.MaxLogTailBytes)
}

// applyBuildEvidence records the worker's resources and log tail when the
// report carries them (a later report of the same dispatch says as much or
// more; M1 clears both).
func applyBuildEvidence(n *job.Record, res *journal.TResources, logTail *string) {
	if res != nil {
		n.Resources = jobcodec.ResourcesFromThrift(res)
	}
	if logTail != nil {
		n.LogTail = *logTail
	}
}

// leftover is the index directory a job whose outcome is n's left behind
// (docs/decisions.md, "leftover index directory"): only a NOT_COMMITTED job
// has one — the uuid the verified result names, else the uuid its worker
// announced (record 41), which that result did not commit. COMMITTED
// committed what it built, and UNKNOWN does not know.
func leftover(n *job.Record, reported string) string {
	if n.MutationState != job.NotCommitted {
		return ""
	}
	if reported != "" {
		return reported
	}
	return n.IndexUUID
}
