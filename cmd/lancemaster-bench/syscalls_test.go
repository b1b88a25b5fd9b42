package main

import (
	"os"
	"os/exec"
	"testing"
)

// The kernel's counters move with the calls made, children included.
func TestReadIOCountsThisProcessAndItsChildren(t *testing.T) {
	before := readIO()
	if !before.ok {
		t.Skip("/proc/self/io cannot be read here")
	}
	f, err := os.CreateTemp(t.TempDir(), "io")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const n = 50
	for range n {
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	after := readIO()
	if after.writes-before.writes < n {
		t.Fatalf("%d writes counted for %d made", after.writes-before.writes, n)
	}

	// A child that is still running is summed in.
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep to start:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	found := false
	for _, pid := range childrenOf(os.Getpid()) {
		found = found || pid == cmd.Process.Pid
	}
	if !found {
		t.Fatalf("child %d not among %v", cmd.Process.Pid, childrenOf(os.Getpid()))
	}
}

func TestPerOpGivesNoFigureWithoutBothMarks(t *testing.T) {
	from, to := ioMark{reads: 100, writes: 50, ok: true}, ioMark{reads: 1100, writes: 550, ok: true}
	if r, w, ok := perOp(from, to, 100); !ok || r != 10 || w != 5 {
		t.Fatalf("perOp = %v %v %v, want 10 5 true", r, w, ok)
	}
	for name, c := range map[string]struct {
		from, to ioMark
		ops      int
	}{
		"no first mark":   {ioMark{}, to, 100},
		"no second mark":  {from, ioMark{}, 100},
		"nothing done":    {from, to, 0},
		"counters shrank": {to, from, 100}, // a child gone between the marks
	} {
		if _, _, ok := perOp(c.from, c.to, c.ops); ok {
			t.Errorf("%s: a figure was given", name)
		}
	}
	if got := ioNote(10.24, 4.96); got != "; system calls per op: 5.0 writes, 10.2 reads" {
		t.Errorf("ioNote = %q", got)
	}
	if got := ioNote(0, 0); got != "" {
		t.Errorf("ioNote without a figure = %q", got)
	}
}
