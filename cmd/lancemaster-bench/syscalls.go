package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Read and write system calls per operation of a load point, counted by
// the kernel (/proc/<pid>/io: syscr, syscw) for this process and every
// process it started (the etcd section's members). A peer section's
// clients and servers are all among them, so the figure compares whole
// systems: etcd's calls share connections and leave together, an
// admission's four Thrift messages each take a write and wake a reader
// (docs/benchmarks.md, "messages per operation"). Sockets and log files
// both count; a read that finds nothing yet counts too.

// ioMark is the summed counters at one moment; ok is false where /proc
// cannot be read (then no figure is given).
type ioMark struct {
	reads, writes uint64
	ok            bool
}

// readIO sums syscr and syscw over this process and its children.
func readIO() ioMark {
	self := os.Getpid()
	m := ioMark{}
	if !m.add(self) {
		return m
	}
	m.ok = true
	for _, pid := range childrenOf(self) {
		m.add(pid) // a child that just exited is simply not counted
	}
	return m
}

// add adds one process's counters; false when they cannot be read.
func (m *ioMark) add(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "io"))
	if err != nil {
		return false
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		k, v, ok := bytes.Cut(s.Bytes(), []byte(": "))
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			continue
		}
		switch string(k) {
		case "syscr":
			m.reads += n
		case "syscw":
			m.writes += n
		}
	}
	return true
}

// childrenOf lists the processes whose parent is pid (parseStat).
func childrenOf(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n == pid {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if _, ppid, _, ok := parseStat(b); ok && ppid == pid {
			out = append(out, n)
		}
	}
	return out
}

// perOp is the calls between from and to per operation of a window that
// completed ops; ok is false when either mark is missing or nothing
// completed.
func perOp(from, to ioMark, ops int) (reads, writes float64, ok bool) {
	if !from.ok || !to.ok || ops <= 0 || to.reads < from.reads || to.writes < from.writes {
		return 0, 0, false
	}
	return float64(to.reads-from.reads) / float64(ops), float64(to.writes-from.writes) / float64(ops), true
}

// ioNote is the rows' note on the system calls per operation, or "" without
// a figure.
func ioNote(reads, writes float64) string {
	if writes == 0 && reads == 0 {
		return ""
	}
	return fmt.Sprintf("; system calls per op: %.1f writes, %.1f reads", writes, reads)
}
