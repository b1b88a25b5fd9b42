package master

import (
	"testing"

	"github.com/lancemaster/lancemaster/pkg/raftfsm"
)

// The propose histogram's label is the command type's registered name, for
// every type (report batches were "type_16" while names lived in a table of
// their own); an unknown type is type_N without its ignorable bit.
func TestProposeLabelsAreTheRegisteredNames(t *testing.T) {
	for _, s := range raftfsm.Commands() {
		if got := commandName([]byte{byte(s.Type), 0}); got != s.Name {
			t.Errorf("command type %d labelled %q, want %q", s.Type, got, s.Name)
		}
	}
	for cmd, want := range map[byte]string{16: "report_batch", 0x7f: "type_127", 0xff: "type_127"} {
		if got := commandName([]byte{cmd}); got != want {
			t.Errorf("commandName(%#x) = %q, want %q", cmd, got, want)
		}
	}
	if got := commandName(nil); got != "empty" {
		t.Errorf("commandName(nil) = %q", got)
	}
}
