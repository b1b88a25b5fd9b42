package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The cgroup interface files each mode reads and writes, on a fake cgroupfs
// (a temp dir holding the files the kernel would create on mkdir; a file the
// code writes starts empty, since a plain file is not replaced on write). This
// machine's cgroup v2 has no memory or pids controller, so the v2 limit
// files are not exercised against a kernel here (the v2 kill-only mode and
// the v1 limits are, in isolation_test.go); this pins the file protocol.
func TestCgroupInterfaceFiles(t *testing.T) {
	const mem, pids = int64(64 << 20), int64(32)
	fake := func(t *testing.T, files map[string]string) string {
		t.Helper()
		d := t.TempDir()
		for name, v := range files {
			if err := os.WriteFile(filepath.Join(d, name), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	read := func(t *testing.T, dir, name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	write := func(t *testing.T, dir, name, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("v2", func(t *testing.T) {
		d := fake(t, map[string]string{"memory.max": "", "pids.max": "", "memory.swap.max": "",
			"memory.oom.group": "", "cgroup.kill": "", "cgroup.events": "populated 1\nfrozen 0\n",
			"memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n", "memory.peak": "1234567",
			"pids.current": "3", "cgroup.procs": ""})
		c := &invCgroup{b: &cgroupBackend{v2: true, memLimit: mem, pidsLimit: pids, limits: true}, dirs: []string{d}}
		if err := c.setLimits(); err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{"memory.max": "67108864", "pids.max": "32",
			"memory.swap.max": "0", "memory.oom.group": "1"} {
			if got := read(t, d, name); got != want {
				t.Errorf("%s = %q, want %q", name, got, want)
			}
		}
		if err := c.checkLimits(); err != nil {
			t.Fatal(err)
		}
		write(t, d, "pids.max", "max")
		if c.checkLimits() == nil {
			t.Error("checkLimits accepted pids.max = max")
		}
		if c.empty() {
			t.Error("populated 1 read as empty")
		}
		write(t, d, "cgroup.events", "populated 0\nfrozen 0\n")
		if !c.empty() {
			t.Error("populated 0 read as not empty")
		}
		if c.oomKilled() {
			t.Error("oom_kill 0 read as an OOM kill (the oom line must not count)")
		}
		write(t, d, "memory.events", "low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\noom_group_kill 1\n")
		if !c.oomKilled() {
			t.Error("oom_kill 1 not read as an OOM kill")
		}
		if got := c.peakMemory(); got != 1234567 {
			t.Errorf("peak memory %d, want memory.peak", got)
		}
		if n, ok := c.pidsCurrent(); !ok || n != 3 {
			t.Errorf("pids.current %d %v", n, ok)
		}
		c.kill()
		if got := read(t, d, "cgroup.kill"); got != "1" {
			t.Errorf("kill wrote cgroup.kill = %q, want 1", got)
		}
	})

	t.Run("v1", func(t *testing.T) {
		md := fake(t, map[string]string{"memory.limit_in_bytes": "",
			"memory.memsw.limit_in_bytes": "", "memory.max_usage_in_bytes": "7654321",
			"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n", "cgroup.procs": ""})
		pd := fake(t, map[string]string{"pids.max": "", "pids.current": "0", "cgroup.procs": ""})
		c := &invCgroup{b: &cgroupBackend{memLimit: mem, pidsLimit: pids, limits: true}, dirs: []string{md, pd}}
		if err := c.setLimits(); err != nil {
			t.Fatal(err)
		}
		if read(t, md, "memory.limit_in_bytes") != "67108864" || read(t, md, "memory.memsw.limit_in_bytes") != "67108864" ||
			read(t, pd, "pids.max") != "32" {
			t.Fatal("v1 limits not written to the memory and pids hierarchies")
		}
		// The kernel rounds the memory limit down to a page.
		write(t, md, "memory.limit_in_bytes", "67104768")
		if err := c.checkLimits(); err != nil {
			t.Fatal(err)
		}
		if !c.empty() {
			t.Error("no member read as not empty")
		}
		write(t, md, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
		if !c.oomKilled() || c.peakMemory() != 7654321 {
			t.Error("v1 OOM kill or peak not read")
		}
	})
}
