package version_test

import (
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/raftfsm"
	"github.com/lancemaster/lancemaster/pkg/version"
)

// The format versions a binary announces are the ones its code uses.
func TestFormatVersionsAreTheCodes(t *testing.T) {
	if version.JournalFormat != raftfsm.SnapshotFormatVersion {
		t.Errorf("JournalFormat %d, raftfsm.SnapshotFormatVersion %d", version.JournalFormat, raftfsm.SnapshotFormatVersion)
	}
	if version.WorkerProtocol != frame.Protocol {
		t.Errorf("WorkerProtocol %d, frame.Protocol %d", version.WorkerProtocol, frame.Protocol)
	}
}

func TestInfoIsNeverEmpty(t *testing.T) {
	i := version.Get()
	if i.Version == "" || i.Revision == "" || !strings.HasPrefix(i.GoVersion, "go") {
		t.Fatalf("%+v", i)
	}
	if s := i.String(); !strings.HasPrefix(s, "lancemaster "+i.Version+", commit ") {
		t.Fatalf("String() = %q", s)
	}
	if s := i.Short(); !strings.HasPrefix(s, i.Version+" (") {
		t.Fatalf("Short() = %q", s)
	}
}
