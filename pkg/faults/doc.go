// Package faults holds the randomized fault-schedule test of lancemaster
// (docs/faults.md): an in-process cluster of three real masters
// (pkg/master over loopback, real raft-boltdb stores) and three real
// backend agents (pkg/backend) driven by a scripted fake Runner, a seeded
// schedule of faults (leader kills and restarts, paused leaders, backend
// crashes, refusing backends, dropped / duplicated / misrouted reports,
// operator snapshot restores, clock jumps), and the invariants checked
// after every schedule once everything is healed and has converged.
//
// Everything lives in the package's test files; this file only documents
// it. Run one seed with
//
//	go test ./pkg/faults -run TestFaultSchedules -faults.seed=N -v
//
// and many with `make fault-schedules`.
package faults
