package admin

import (
	"os"
	"strings"
	"testing"
)

// The operator docs quote the force-release warning as the master journals
// and the CLI prints it (docs/cli.md shows the CLI's stderr line; the
// runbook in docs/operations.md wraps it over lines).
func TestDocsQuoteTheForceReleaseWarning(t *testing.T) {
	for path, want := range map[string]string{
		"../../docs/cli.md":        "Warning: " + ForceReleaseWarning,
		"../../docs/operations.md": ForceReleaseWarning,
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(strings.Fields(string(b)), " "), want) {
			t.Errorf("%s does not quote %q", path, want)
		}
	}
}
