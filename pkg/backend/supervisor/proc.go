package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// procStat is the part of /proc/PID/stat the supervisor needs.
type procStat struct {
	state   byte
	ppid    int
	pgrp    int
	session int
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// "pid (comm) state ppid pgrp ..." — comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 4 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	sid, err3 := strconv.Atoi(string(f[3]))
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp, session: sid}, nil
}

// allPids lists the processes (thread-group leaders) in /proc.
func allPids() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if p, err := strconv.Atoi(n); err == nil && p > 0 {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// scanProcs returns the pids whose stat matches keep. A process that exits
// during the scan is skipped.
func scanProcs(keep func(pid int, st procStat) bool) ([]int, error) {
	pids, err := allPids()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, p := range pids {
		st, err := readStat(p)
		if err != nil {
			continue
		}
		if keep(p, st) {
			out = append(out, p)
		}
	}
	return out, nil
}

// childrenOf lists the children (live or zombie) of process ppid, whichever
// of its threads forked them.
func childrenOf(ppid int) ([]int, error) {
	return scanProcs(func(_ int, st procStat) bool { return st.ppid == ppid })
}

// sessionMembers lists the processes (live or zombie) other than except
// whose process group or session is id: a worker's group and session both
// carry its pid, so this finds every descendant that did not setsid.
func sessionMembers(id, except int) ([]int, error) {
	return scanProcs(func(p int, st procStat) bool { return (st.pgrp == id || st.session == id) && p != except })
}

// signalSession signals the members of session id outside its main process
// group (descendants that called setpgid). Call only while the leader is
// unreaped: its pid, hence the session id, cannot be recycled, and each
// member is re-checked through a pidfd.
func signalSession(id int, sig syscall.Signal) {
	pids, err := scanProcs(func(_ int, st procStat) bool { return st.session == id && st.pgrp != id })
	if err != nil || len(pids) == 0 {
		return
	}
	signalVerified(pids, sig, func(want map[int]bool) map[int]bool {
		for p := range want {
			if st, err := readStat(p); err != nil || st.session != id {
				delete(want, p)
			}
		}
		return want
	})
}

// groupGone is the group proof: no live or zombie member of pgid remains.
// Only meaningful once the leader has been reaped (a pinned group always
// has its leader).
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// pidfdSupported: pidfd_open exists (Linux ≥ 5.3).
var pidfdSupported = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
})

// signalVerified signals pids that are not our children without the
// recycled-pid race: it opens a pidfd for each, then asks stillOurs which of
// them still belong where they were found (e.g. are still listed in the
// worker's cgroup), then signals those through their pidfds. A process that
// died in between makes its pidfd signal fail with ESRCH instead of hitting
// a newcomer that reused its pid.
func signalVerified(pids []int, sig syscall.Signal, stillOurs func(map[int]bool) map[int]bool) {
	if len(pids) == 0 {
		return
	}
	if !pidfdSupported() {
		for p := range stillOurs(setOf(pids)) {
			_ = syscall.Kill(p, sig)
		}
		return
	}
	fds := make(map[int]int, len(pids))
	for _, p := range pids {
		if fd, err := unix.PidfdOpen(p, 0); err == nil {
			fds[p] = fd
		}
	}
	want := make(map[int]bool, len(fds))
	for p := range fds {
		want[p] = true
	}
	confirmed := stillOurs(want)
	for p, fd := range fds {
		if confirmed[p] {
			_ = unix.PidfdSendSignal(fd, sig, nil, 0)
		}
		_ = unix.Close(fd)
	}
}

func setOf(pids []int) map[int]bool {
	m := make(map[int]bool, len(pids))
	for _, p := range pids {
		m[p] = true
	}
	return m
}
