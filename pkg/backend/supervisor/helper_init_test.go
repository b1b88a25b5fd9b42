package supervisor

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/backend/supervisor/cgexec"
)

// The placement helper runs from cgexec's init, before the host binary's
// heavy package initializations: this test binary, re-executed as a probe
// helper with Go's init trace on, answers "ok" on its status pipe, and
// zap's core — a dependency of this package, so initialized before any
// main() or TestMain — was never initialized. It fails if cgexec imports
// something heavy, or if the helper only runs from MaybeRunHelper.
func TestHelperRunsBeforeTheHostsInitialization(t *testing.T) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer statusR.Close()
	cmd := exec.Command(os.Args[0], cgexec.Argv(cgexec.ModeProbe, 0, "", nil)[1:]...)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	cmd.ExtraFiles = []*os.File{statusW} // fd 3: cgexec.StatusFD
	var trace strings.Builder
	cmd.Stderr = &trace
	err = cmd.Run()
	statusW.Close()
	if err != nil {
		t.Fatalf("probe helper: %v\n%s", err, trace.String())
	}
	if status := readStatus(statusR, 5e9); status != cgexec.OK {
		t.Fatalf("status %q, want %q", status, cgexec.OK)
	}
	if !strings.Contains(trace.String(), "init os @") {
		t.Fatalf("no init trace (GODEBUG=inittrace=1 ignored?):\n%s", trace.String())
	}
	for _, heavy := range []string{"init go.uber.org/zap/zapcore ", "init go.uber.org/zap "} {
		if strings.Contains(trace.String(), heavy) {
			t.Errorf("the helper ran after %q: it pays the host's initialization on every job\n%s", heavy, trace.String())
		}
	}
}
