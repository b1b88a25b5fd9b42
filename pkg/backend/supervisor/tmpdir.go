package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"go.uber.org/zap"
)

// tmpPrefix + "<agent pid>-<seq>" names a worker's private TMPDIR under
// Config.TempRoot.
const tmpPrefix = "lancemaster-tmp-"

// tmpVars are the variables a worker's private TMPDIR is given in (Node's
// os.tmpdir() reads TMPDIR, then TMP and TEMP; Lance's shuffle files and
// Rust's std::env::temp_dir() read TMPDIR).
var tmpVars = []string{"TMPDIR", "TMP", "TEMP"}

// makeTmpDir creates one invocation's fresh, empty TMPDIR (0700) and
// returns it with env rewritten to name it.
func (s *Supervisor) makeTmpDir(env []string) (dir string, out []string, err error) {
	if err := os.MkdirAll(s.cfg.TempRoot, 0o700); err != nil {
		return "", nil, err
	}
	dir = filepath.Join(s.cfg.TempRoot, fmt.Sprintf("%s%d-%d", tmpPrefix, os.Getpid(), invSeq.Add(1)))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", nil, err
	}
	out = make([]string, 0, len(env)+len(tmpVars))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !isTmpVar(k) {
			out = append(out, kv)
		}
	}
	for _, k := range tmpVars {
		out = append(out, k+"="+dir)
	}
	return dir, out, nil
}

func isTmpVar(k string) bool {
	for _, v := range tmpVars {
		if k == v {
			return true
		}
	}
	return false
}

// removeTmpDir removes a worker's TMPDIR and everything in it, once no
// process of the worker is left to write there. A worker may have taken
// the write or search bit off a directory of its own: those are given back
// to the owner and the removal retried.
func removeTmpDir(dir string) error {
	if dir == "" {
		return nil
	}
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, werr error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// cleanTmp removes the TMPDIR of a finished worker and logs a failure (it
// never changes the outcome: the worker is gone either way).
func (s *Supervisor) cleanTmp(dir string) {
	if err := removeTmpDir(dir); err != nil {
		s.log.Warn("worker TMPDIR not removed", zap.String("dir", dir), zap.Error(err))
	}
}

// removeStaleTmp removes the TMPDIRs a crashed agent left under TempRoot:
// those of agents no longer running and, once per process, those of an
// earlier process with this pid (none of this process's runs has started
// yet when New calls it).
func (s *Supervisor) removeStaleTmp() {
	stale.Lock()
	defer stale.Unlock()
	first := !stale.seen["tmp:"+s.cfg.TempRoot]
	stale.seen["tmp:"+s.cfg.TempRoot] = true
	ents, err := os.ReadDir(s.cfg.TempRoot)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !leftByDeadAgent(e.Name(), tmpPrefix, first) {
			continue
		}
		d := filepath.Join(s.cfg.TempRoot, e.Name())
		if err := removeTmpDir(d); err != nil {
			s.log.Warn("stale worker TMPDIR not removed", zap.String("dir", d), zap.Error(err))
		} else {
			s.log.Info("removed stale worker TMPDIR", zap.String("dir", d))
		}
	}
}

// leftByDeadAgent reports whether name, prefix + "<pid>-<seq>", was made by
// an agent that is no longer running: another pid that is gone, or this
// pid when first is set (this process has made nothing there yet, so it is
// an earlier process's). Run by New, before any run of this process.
func leftByDeadAgent(name, prefix string, first bool) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	pidStr, _, ok2 := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidStr)
	switch {
	case !ok || !ok2 || err != nil || pid <= 0:
		return false
	case pid == os.Getpid():
		return first // else another Supervisor of this process
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) // else its agent may still be running
}
