package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLIStdin runs the CLI in-process against addr with stdin reading in
// (os.Stdin is swapped: not parallel) and stdout out.
func runCLIStdin(t *testing.T, in []byte, out *bytes.Buffer, args ...string) (stderr string, code int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(path, in, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = old }()
	var errb bytes.Buffer
	code = execute(t.Context(), args, out, &errb, func(k string) string { return map[string]string{"USER": "alice"}[k] })
	return errb.String(), code
}

func TestSnapshotSaveToStdout(t *testing.T) {
	t.Parallel()
	file := snapshotFileBytes(t, 40)
	addr := serve(t, &snapMaster{fakeMaster: &fakeMaster{}, file: file})
	out, stderr, code := cli(t, addr, "operator", "snapshot", "save", "-")
	if code != exitOK || out != string(file) {
		t.Fatalf("exit %d, %d bytes on stdout (want the file's %d), stderr %q", code, len(out), len(file), stderr)
	}
	if !strings.Contains(stderr, "raft index 42, term 3 (0 jobs, 0 catalogs, 40 backends; ") || !strings.Contains(stderr, "to stdout") {
		t.Fatalf("stderr %q", stderr)
	}

	// A terminal is refused before anything is asked, unless forced.
	var term terminal
	var errb bytes.Buffer
	getenv := func(string) string { return "" }
	if code := execute(t.Context(), []string{"--address", addr, "operator", "snapshot", "save", "-"}, &term, &errb, getenv); code != exitUsage ||
		term.Len() != 0 || !strings.Contains(errb.String(), "refusing to write a snapshot to a terminal") || !strings.Contains(errb.String(), "--force") {
		t.Fatalf("terminal: exit %d, %d bytes, stderr %q", code, term.Len(), errb.String())
	}
	errb.Reset()
	if code := execute(t.Context(), []string{"--address", addr, "operator", "snapshot", "save", "-", "--force"}, &term, &errb, getenv); code != exitOK ||
		!bytes.Equal(term.Bytes(), file) {
		t.Fatalf("forced: exit %d, %d bytes, stderr %q", code, term.Len(), errb.String())
	}
}

func TestSnapshotSaveToStdoutRefusesACorruptedTransfer(t *testing.T) {
	t.Parallel()
	file := snapshotFileBytes(t, 40)
	file[len(file)-5] ^= 0x40
	addr := serve(t, &snapMaster{fakeMaster: &fakeMaster{}, file: file})
	out, stderr, code := cli(t, addr, "operator", "snapshot", "save", "-")
	if code != exitError || !strings.Contains(stderr, "does not verify") || !strings.Contains(stderr, "discard them") {
		t.Fatalf("exit %d, %d bytes, stderr %q", code, len(out), stderr)
	}
}

func TestSnapshotRestoreFromStdin(t *testing.T) {
	file := snapshotFileBytes(t, 40)
	sm := &snapMaster{fakeMaster: &fakeMaster{}, file: file}
	addr := serve(t, sm)
	var out bytes.Buffer
	stderr, code := runCLIStdin(t, file, &out, "--address", addr, "operator", "snapshot", "restore", "-")
	if code != exitOK || !strings.Contains(out.String(), "raft index 42") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), stderr)
	}
	sm.mu.Lock()
	got := bytes.Clone(sm.uploaded.Bytes())
	sm.mu.Unlock()
	if !bytes.Equal(got, file) {
		t.Fatalf("uploaded %d bytes, want the file's %d", len(got), len(file))
	}
	if calls := sm.recordedCalls(); len(calls) != 1 || calls[0].req != int64(len(file)) {
		t.Fatalf("calls %+v: the size is announced up front", calls)
	}

	// Bad input on stdin is refused before anything is sent.
	for name, in := range map[string][]byte{"empty": nil, "corrupted": append(bytes.Clone(file[:len(file)-1]), file[len(file)-1]^1)} {
		sm2 := &snapMaster{fakeMaster: &fakeMaster{}}
		out.Reset()
		stderr, code := runCLIStdin(t, in, &out, "--address", serve(t, sm2), "operator", "snapshot", "restore", "-")
		if code != exitError || !strings.Contains(stderr, "nothing was sent") || len(sm2.recordedCalls()) != 0 {
			t.Fatalf("%s: exit %d, stderr %q, calls %+v", name, code, stderr, sm2.recordedCalls())
		}
	}
}

func TestSpoolStdinIsBounded(t *testing.T) {
	t.Parallel()
	if _, err := spoolStdin(bytes.NewReader(make([]byte, 11)), 10); err == nil || !strings.Contains(err.Error(), "more than 10 bytes") {
		t.Fatalf("11 bytes with a bound of 10: %v", err)
	}
	f, err := spoolStdin(bytes.NewReader([]byte("0123456789")), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := os.Stat(f.Name()); !os.IsNotExist(err) {
		t.Fatalf("the spool file %s is still linked: %v", f.Name(), err)
	}
}
