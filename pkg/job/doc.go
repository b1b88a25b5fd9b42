// Package job is the domain of lancemaster: the job record, its states and
// predicates, name and locator normalization, property validation, the schema
// contract, result classification and byte bounds (DESIGN.md §2–§6).
//
// It is pure: no clock, no randomness, no I/O. Everything here may be called
// from the FSM's Apply.
package job
