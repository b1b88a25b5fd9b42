package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// builtBinary builds this command once per test run (into a directory
// removed when the run ends) and returns its path.
func builtBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lancemaster-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "lancemaster")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// runBinary runs the built binary with args and a clean LANCEMASTER_*
// environment and returns stdout, stderr and the exit code.
func runBinary(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(builtBinary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LANCEMASTER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

// The CLI's conventions through the real binary and its real exit status:
// the version line, a malformed --address and a bad flag value (usage: 2,
// before any I/O), a master that is not there (3, with the hint), a
// mistyped command with its suggestion, shell completion, and a config
// file checked without starting anything.
func TestCLIThroughTheBinary(t *testing.T) {
	t.Parallel()
	dead := deadAddress(t)
	bad := filepath.Join(t.TempDir(), "master.yaml")
	if err := os.WriteFile(bad, []byte("node_id: m1\nraft_bnd: 127.0.0.1:7001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args       []string
		code       int
		out, errIn string
	}{
		{[]string{"--version"}, exitOK, "lancemaster ", ""},
		{[]string{"--address", "nohost", "jobs", "list"}, exitUsage, "", "--address"},
		{[]string{"--address", dead, "jobs", "list", "--limit", "0"}, exitUsage, "", "--limit"},
		{[]string{"--address", dead, "jobs", "list"}, exitUnreachable, "", "no master reachable"},
		{[]string{"jbos", "list"}, exitUsage, "", "did you mean jobs?"},
		{[]string{"completion", "bash"}, exitOK, "__start_lancemaster", ""},
		{[]string{"config", "validate", bad}, exitUsage, "", "raft_bind"},
	} {
		out, stderr, code := runBinary(t, c.args...)
		if code != c.code || !strings.Contains(out, c.out) || !strings.Contains(stderr, c.errIn) {
			t.Errorf("lancemaster %s: exit %d (want %d)\nstdout %q (want %q in it)\nstderr %q (want %q in it)",
				strings.Join(c.args, " "), code, c.code, clipTest(out), c.out, clipTest(stderr), c.errIn)
		}
	}
}

func clipTest(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}

// TestMain removes the binary builtBinary built, once every test ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
