// Package version says what a lancemaster binary is: its release, the
// commit it was built from, when, with which Go, and the versions of the
// formats it reads and writes, so that an operator can tell two masters or
// backends apart (`lancemaster version`, lancemaster_build_info, heartbeats).
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/lancemaster/lancemaster/idl"
)

// Set at link time by the Makefile (-ldflags "-X …"); empty otherwise, and
// then read from the build info the go command stamps from git.
var (
	version   string
	revision  string
	buildDate string
)

// Format versions. Each is a constant of the code that owns the format; a
// test keeps these equal to them. The Thrift contract has no number (field
// ids are only ever added): it is named by the fingerprints of its files.
const (
	// JournalFormat is the snapshot format (raftfsm.SnapshotFormatVersion).
	JournalFormat = 1
	// WorkerProtocol is the backend–worker frame protocol (frame.Protocol).
	WorkerProtocol = 1
)

// Info is one binary's identity.
type Info struct {
	Version   string `json:"version"`    // a release tag, or a Go pseudo-version, or "dev"
	Revision  string `json:"revision"`   // the git commit ("unknown" when not built from git)
	Modified  bool   `json:"modified"`   // built from a tree with uncommitted changes
	BuildDate string `json:"build_date"` // the commit time, RFC 3339 ("" when unknown)
	GoVersion string `json:"go_version"`

	JournalFormat  int `json:"journal_format"`
	WorkerProtocol int `json:"worker_protocol"`
	// The IDL files' fingerprints (package idl).
	WireContract    string `json:"wire_contract"`
	AdminContract   string `json:"admin_contract"`
	JournalContract string `json:"journal_contract"`
}

var get = sync.OnceValue(func() Info {
	i := Info{Version: version, Revision: revision, BuildDate: buildDate, GoVersion: runtime.Version(),
		JournalFormat: JournalFormat, WorkerProtocol: WorkerProtocol,
		WireContract: idl.WireFingerprint, AdminContract: idl.AdminFingerprint, JournalContract: idl.JournalFingerprint}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if i.Revision == "" {
					i.Revision = s.Value
				}
			case "vcs.time":
				if i.BuildDate == "" {
					i.BuildDate = s.Value
				}
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	if i.Revision == "" {
		i.Revision = "unknown"
	}
	return i
})

// Get returns this binary's Info.
func Get() Info { return get() }

// Short is "VERSION (REVISION12)", for heartbeats and table columns.
func (i Info) Short() string {
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if i.Modified {
		rev += "+dirty"
	}
	return i.Version + " (" + rev + ")"
}

// String is the one-line form `lancemaster --version` prints.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString("lancemaster " + i.Version)
	b.WriteString(", commit " + i.Revision)
	if i.Modified {
		b.WriteString(" (modified)")
	}
	if i.BuildDate != "" {
		b.WriteString(", built " + i.BuildDate)
	}
	b.WriteString(", " + i.GoVersion)
	return b.String()
}
