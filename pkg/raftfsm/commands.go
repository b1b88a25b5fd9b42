package raftfsm

import (
	"fmt"
	"sort"
)

// CommandSpec is everything the process knows about one command type. Each
// command family states it once, in its own file, when it registers its
// apply function (register); every table that needs a property of command
// types is derived from the registrations: the metrics label
// (pkg/master), which types a follower may forward to the leader
// (pkg/admin), which entries wake the dispatcher (pkg/master), and the
// decoders that check an entry before it is proposed (CheckCommand).
type CommandSpec struct {
	Type CommandType
	// Name labels the command in metrics and docs (lower_snake_case,
	// unique, never changed once released: dashboards and alerts use it).
	Name string
	// Forward says whether an admin write on a follower may send this
	// command to the leader (ForwardApply). Only what an operator's write
	// produces is forwarded: a leader service's entries (RUNNING, results,
	// proofs, refreshes, GC) are never accepted from another master.
	Forward ForwardRule
	// Wake says whether applying the command may give the dispatcher work,
	// so that the leader wakes a round at once instead of at its interval.
	Wake WakeRule
}

// ForwardRule: may a follower forward the command? The zero value is not a
// rule: register refuses it, so every command type decides.
type ForwardRule uint8

const (
	ForwardNever ForwardRule = iota + 1
	ForwardFromFollower
)

// WakeRule: does applying the command wake the dispatcher? The zero value
// is not a rule: register refuses it, so every command type decides.
type WakeRule uint8

const (
	WakeNever WakeRule = iota + 1
	WakeDispatcher
)

// Ignorable reports whether a master that does not know the type may skip
// it (IgnorableFlag).
func (s CommandSpec) Ignorable() bool { return s.Type&IgnorableFlag != 0 }

// Forwardable reports whether a follower may forward the command.
func (s CommandSpec) Forwardable() bool { return s.Forward == ForwardFromFollower }

// WakesDispatcher reports whether applying the command wakes the dispatcher.
func (s CommandSpec) WakesDispatcher() bool { return s.Wake == WakeDispatcher }

// specs holds every registered command type's spec (register fills it).
var specs = map[CommandType]CommandSpec{}

// LookupCommand returns the spec of a command type (with its ignorable bit,
// as the entry's first byte carries it).
func LookupCommand(ct CommandType) (CommandSpec, bool) {
	s, ok := specs[ct]
	return s, ok
}

// Commands lists every registered command type's spec, by type.
func Commands() []CommandSpec {
	out := make([]CommandSpec, 0, len(specs))
	for _, s := range specs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// checkSpec refuses an incomplete or clashing registration (at package
// initialization: any test or process start fails).
func checkSpec(s CommandSpec) {
	switch {
	case s.Name == "":
		panic(fmt.Sprintf("raftfsm: command type %d registered without a name", s.Type))
	case s.Forward != ForwardNever && s.Forward != ForwardFromFollower:
		panic(fmt.Sprintf("raftfsm: command %s (type %d) does not say whether a follower may forward it", s.Name, s.Type))
	case s.Wake != WakeNever && s.Wake != WakeDispatcher:
		panic(fmt.Sprintf("raftfsm: command %s (type %d) does not say whether it wakes the dispatcher", s.Name, s.Type))
	}
	if _, dup := specs[s.Type]; dup {
		panic(fmt.Sprintf("raftfsm: command type %d registered twice", s.Type))
	}
	for _, o := range specs {
		if o.Name == s.Name {
			panic(fmt.Sprintf("raftfsm: command name %q used by types %d and %d", s.Name, o.Type, s.Type))
		}
	}
}
