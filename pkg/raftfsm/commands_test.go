package raftfsm

import (
	"os"
	"strings"
	"testing"
)

// Every command type is registered with its whole spec, and the specs are
// pinned: a name is a metrics label (dashboards and alerts read it), what
// a follower may forward is a security boundary (ForwardApply), and what
// wakes the dispatcher decides how soon work starts. A new command type
// fails here until it is added, with every property decided.
func TestCommandSpecsArePinned(t *testing.T) {
	type want struct {
		name          string
		forward, wake bool
	}
	pinned := map[CommandType]want{
		CmdAdmit:            {"admit", true, true},
		CmdMarkRunningBatch: {"mark_running", false, false},
		CmdCompleteBatch:    {"complete", false, true},
		CmdRecordProofBatch: {"record_proof", false, true},
		CmdRefreshBatch:     {"refresh", false, false},
		CmdCancel:           {"cancel", true, true},
		CmdForceRelease:     {"force_release", true, true},
		CmdGC:               {"gc", false, false},
		CmdCreateCatalog:    {"create_catalog", true, true},
		CmdUpdateCatalog:    {"update_catalog", true, true},
		CmdRemoveCatalog:    {"remove_catalog", true, true},
		CmdAddBackend:       {"add_backend", true, true},
		CmdRemoveBackend:    {"remove_backend", true, true},
		CmdSetOption:        {"set_option", true, true},
		CmdAdmitBatch:       {"admit_batch", true, true},
		CmdReportBatch:      {"report_batch", false, true},
		CmdSetMemberAddress: {"set_member_address", false, true},
		CmdSetClusterID:     {"set_cluster_id", false, true},
		CmdDrainBackend:     {"drain_backend", true, true},
		CmdAudit:            {"audit", true, false},
	}
	all := Commands()
	if len(all) != len(pinned) || len(registry) != len(pinned) || len(decoders) != len(pinned) {
		t.Fatalf("%d specs, %d apply functions, %d decoders; %d pinned here (pin a new command type)",
			len(all), len(registry), len(decoders), len(pinned))
	}
	for i, s := range all {
		w, ok := pinned[s.Type]
		switch {
		case !ok:
			t.Errorf("command type %d (%s) is not pinned here", s.Type, s.Name)
		case s.Name != w.name || s.Forwardable() != w.forward || s.WakesDispatcher() != w.wake:
			t.Errorf("command type %d: %s forward %v wake %v, pinned %s forward %v wake %v",
				s.Type, s.Name, s.Forwardable(), s.WakesDispatcher(), w.name, w.forward, w.wake)
		}
		if i > 0 && all[i-1].Type >= s.Type {
			t.Errorf("Commands() is not in type order at %d", s.Type)
		}
		if s.Ignorable() != (s.Type&IgnorableFlag != 0) || strings.ToLower(s.Name) != s.Name {
			t.Errorf("command type %d: ignorable %v, name %q", s.Type, s.Ignorable(), s.Name)
		}
	}
}

// An incomplete registration is refused when the package initializes.
func TestRegisterRefusesAnIncompleteSpec(t *testing.T) {
	for name, spec := range map[string]CommandSpec{
		"no name":      {Type: 99, Forward: ForwardNever, Wake: WakeNever},
		"no forward":   {Type: 99, Name: "x", Wake: WakeNever},
		"no wake":      {Type: 99, Name: "x", Forward: ForwardNever},
		"a taken type": {Type: CmdAdmit, Name: "x", Forward: ForwardNever, Wake: WakeNever},
		"a taken name": {Type: 99, Name: "admit", Forward: ForwardNever, Wake: WakeNever},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: checkSpec accepted %+v", name, spec)
				}
			}()
			checkSpec(spec)
		}()
	}
}

// docs/metrics.md lists every command name the propose histogram can carry.
func TestMetricsDocListsEveryCommandName(t *testing.T) {
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "`lancemaster_propose_duration_seconds`") {
			line = l
		}
	}
	_, list, ok := strings.Cut(line, "Commands (")
	if !ok {
		t.Fatal("docs/metrics.md: no Commands list on the lancemaster_propose_duration_seconds row")
	}
	for _, s := range Commands() {
		if !strings.Contains(list, " "+s.Name+",") && !strings.Contains(list, " "+s.Name+" (") {
			t.Errorf("docs/metrics.md does not list the command %q", s.Name)
		}
	}
}
