package consoletest

import (
	"os"
	"path/filepath"
	"testing"
)

// tb records what Chromium asks of its test instead of stopping it.
type tb struct {
	testing.TB
	skipped, failed bool
}

func (f *tb) Helper()               {}
func (f *tb) Skip(...any)           { f.skipped = true }
func (f *tb) Fatal(...any)          { f.failed = true }
func (f *tb) Fatalf(string, ...any) { f.failed = true }

// Without chromium the browser tests skip, unless CI is set: then they
// fail. A chromium named by $LANCEMASTER_CHROMIUM is used.
func TestChromiumSkipsOrFailsWhenAbsent(t *testing.T) {
	saved := chromiumPaths
	t.Cleanup(func() { chromiumPaths = saved })
	chromiumPaths = []string{filepath.Join(t.TempDir(), "no-chromium")}
	t.Setenv("PATH", t.TempDir())
	t.Setenv("LANCEMASTER_CHROMIUM", "")
	for _, tc := range []struct {
		ci           string
		skip, failed bool
	}{{"", true, false}, {"false", true, false}, {"true", false, true}, {"1", false, true}} {
		t.Setenv("CI", tc.ci)
		f := &tb{TB: t}
		if p := Chromium(f); p != "" || f.skipped != tc.skip || f.failed != tc.failed {
			t.Errorf("CI=%q: path %q, skipped %v, failed %v; want skipped %v, failed %v", tc.ci, p, f.skipped, f.failed, tc.skip, tc.failed)
		}
	}
	fake := filepath.Join(t.TempDir(), "chromium")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LANCEMASTER_CHROMIUM", fake)
	t.Setenv("CI", "true")
	f := &tb{TB: t}
	if p := Chromium(f); p != fake || f.skipped || f.failed {
		t.Errorf("with $LANCEMASTER_CHROMIUM: path %q, skipped %v, failed %v", p, f.skipped, f.failed)
	}
}
