package raftfsm

import "testing"

// BenchFixture is the DESIGN-scale fixture (bench_test.go) for the external
// test package's benchmarks (the HTTP API over it).
func BenchFixture(b *testing.B) *FSM {
	f, _ := benchFixture(b)
	return f
}
