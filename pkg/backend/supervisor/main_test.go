package supervisor

// Test workers: the test binary re-executed. LM_SUPERVISOR_TEST_WORKER=1
// makes it a worker that reads its request frame and acts on
// request.IndexName; =sleeper makes it a descendant that ignores SIGTERM and
// sleeps. request.DatasetURI names a scratch directory for handshakes with
// the test (ready / release files).

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
)

const (
	workerEnv = "LM_SUPERVISOR_TEST_WORKER"
	tokenEnv  = "LM_SUPERVISOR_TEST_TOKEN"
)

func TestMain(m *testing.M) {
	MaybeRunHelper() // cgexec's init runs the helper first; this is the documented fallback
	switch os.Getenv(workerEnv) {
	case "":
		if d := os.Getenv(parentEnv); d != "" {
			parentMain(d)
		}
		os.Exit(m.Run())
	case "sleeper":
		sleeper()
	default:
		os.Exit(worker())
	}
}

// sleeper ignores SIGTERM, announces itself in $LM_DIR, and sleeps.
func sleeper() {
	signal.Ignore(syscall.SIGTERM)
	if d := os.Getenv("LM_DIR"); d != "" {
		_ = os.WriteFile(filepath.Join(d, "sleeper-"+strconv.Itoa(os.Getpid())), nil, 0o644)
	}
	time.Sleep(time.Hour)
	os.Exit(0)
}

func writeResult(msg string) {
	_ = frame.Write(os.Stdout, &frame.Result{Protocol: frame.Protocol, Mode: frame.ModeBuild, ResultCode: "OK", Message: msg}, frame.MaxResultBytes)
}

// spawnSleepers starts sleepers — n in the worker's process group, then one
// per escape kind ("setpgid": a new group in the same session; "setsid": a
// new session) — waits until all have announced themselves (so they ignore
// SIGTERM) and reports their pids on stderr.
func spawnSleepers(dir string, n int, escapes ...string) {
	start := func(kind string) {
		cmd := exec.Command("/proc/self/exe")
		cmd.Env = append(os.Environ(), workerEnv+"=sleeper", "LM_DIR="+dir)
		cmd.Stderr = os.Stderr // holds the stderr pipe open while alive
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: kind == "setpgid", Setsid: kind == "setsid"}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "spawn sleeper:", err)
			os.Exit(20)
		}
		fmt.Fprintf(os.Stderr, "sleeper %d %s\n", cmd.Process.Pid, kind)
	}
	for i := 0; i < n; i++ {
		start("group")
	}
	for _, e := range escapes {
		start(e)
	}
	for {
		m, _ := filepath.Glob(filepath.Join(dir, "sleeper-*"))
		if len(m) >= n+len(escapes) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func waitFile(path string) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
}

func ready(dir string) { _ = os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644) }

func worker() int {
	var req frame.Request
	if err := frame.Read(bufio.NewReader(os.Stdin), &req, frame.MaxRequestBytes); err != nil {
		fmt.Fprintln(os.Stderr, "read request:", err)
		return 10
	}
	dir := req.DatasetURI
	switch req.IndexName {
	case "echo":
		writeResult(req.InvocationID)
	case "exit3":
		writeResult("bye")
		return 3
	case "noframe":
	case "malformed":
		_, _ = os.Stdout.Write([]byte{0, 0, 0, 10})
		_, _ = os.Stdout.WriteString("not json!!")
	case "oversized":
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], frame.MaxResultBytes+1)
		_, _ = os.Stdout.Write(n[:])
		_, _ = os.Stdout.Write(make([]byte, frame.MaxResultBytes+1))
	case "trailing":
		writeResult("ok")
		_, _ = os.Stdout.WriteString("extra")
	case "flood":
		line := strings.Repeat("x", 1023) + "\n"
		for i := 0; i < 8<<10; i++ { // 8 MiB
			_, _ = os.Stderr.WriteString(line)
		}
		_, _ = os.Stderr.WriteString("tail-marker\n")
		writeResult("flooded")
	case "secret":
		sec := req.StorageOptions["aws_secret_access_key"]
		fmt.Fprintf(os.Stderr, "connecting with key=%s\nagain %s!\n", sec, sec)
		ready(dir)
		waitFile(filepath.Join(dir, "release"))
		writeResult("used " + sec)
		_, _ = os.Stderr.WriteString("cut short: " + sec[:len(sec)/2])
	case "oom":
		var keep [][]byte
		for i := 0; i < 4096; i++ { // up to 4 GiB, every page touched
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
		}
		writeResult(fmt.Sprint(len(keep)))
	case "whereami":
		b, _ := json.Marshal(whereami())
		writeResult(string(b))
	case "hang":
		time.Sleep(time.Hour)
	case "hang-ready":
		ready(dir)
		time.Sleep(time.Hour)
	case "tmpfiles":
		tmpFiles(dir)
		signal.Ignore(syscall.SIGTERM)
		ready(dir)
		time.Sleep(time.Hour)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		ready(dir)
		time.Sleep(time.Hour)
	case "grandchildren":
		spawnSleepers(dir, 2, "setpgid", "setsid")
		ready(dir)
		time.Sleep(time.Hour)
	case "linger":
		spawnSleepers(dir, 1, "setsid")
		writeResult("done")
	case "segv":
		_ = syscall.Exec("/bin/sh", []string{"sh", "-c", "kill -SEGV $$"}, os.Environ())
		return 11
	case "abort":
		_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
		debug.SetTraceback("crash")
		panic("test worker aborts")
	default:
		fmt.Fprintln(os.Stderr, "unknown behaviour", req.IndexName)
		return 12
	}
	return 0
}

// tmpFiles writes what Lance leaves after a kill into $TMPDIR (shuffle
// files, one in a directory it then makes read-only) and tells the test
// which TMPDIR, TMP and TEMP it was given.
func tmpFiles(dir string) {
	tmp := os.Getenv("TMPDIR")
	_ = os.WriteFile(filepath.Join(dir, "tmpdir"), []byte(tmp+"\n"+os.Getenv("TMP")+"\n"+os.Getenv("TEMP")), 0o644)
	_ = os.WriteFile(filepath.Join(tmp, "shuffle-0.arrow"), make([]byte, 4096), 0o644)
	sub := filepath.Join(tmp, "partition-merge")
	_ = os.Mkdir(sub, 0o755)
	_ = os.WriteFile(filepath.Join(sub, "part-1.arrow"), make([]byte, 4096), 0o444)
	_ = os.Chmod(sub, 0o500)
}

// whereami reports the worker's own cgroups and the limits it finds there.
func whereami() map[string]string {
	res := map[string]string{}
	self, _ := selfCgroups()
	mounts, _ := readMountInfo()
	read := func(path string) string { b, _ := os.ReadFile(path); return strings.TrimSpace(string(b)) }
	if m, ok := v1Mount(mounts, "memory"); ok {
		d := hostDir(m, self["memory"])
		res["memory_cgroup"], res["memory_limit"] = d, read(filepath.Join(d, "memory.limit_in_bytes"))
	}
	if m, ok := v1Mount(mounts, "pids"); ok {
		d := hostDir(m, self["pids"])
		res["pids_cgroup"], res["pids_limit"] = d, read(filepath.Join(d, "pids.max"))
	}
	for _, m := range mounts {
		if p, ok := self[""]; ok && m.fstype == "cgroup2" {
			d := hostDir(m, p)
			res["v2_cgroup"] = d
			if v := read(filepath.Join(d, "memory.max")); v != "" {
				res["memory_limit"], res["pids_limit"] = v, read(filepath.Join(d, "pids.max"))
			}
			break
		}
	}
	return res
}
