package backend

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFileConfig(t *testing.T) {
	c, err := ParseFileConfig([]byte(`
listen: 127.0.0.1:7401
data_dir: /var/lib/lm
masters: [127.0.0.1:7201, 127.0.0.1:7202]
concurrency: 3
isolation: best-effort
memory_limit: 512MiB
pids_limit: 128
inspect_timeout: 30s
cluster_rebind_after: 20s
worker: [node, /opt/builder.js]
worker_env: {LANCE_CPU_THREADS: "1", LANCEDB_LOG: "", EXTRA: "x"}
log_format: console
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Advertise != "127.0.0.1:7401" || c.MemoryLimit != 512<<20 || c.PidsLimit != 128 || c.QueueSize != DefaultQueueSize ||
		c.InspectTimeout != 30*time.Second || c.LogLevel != "info" || !slices.Equal(c.Worker, []string{"node", "/opt/builder.js"}) {
		t.Fatalf("parsed %+v", c)
	}
	ac := c.AgentConfig()
	if ac.Concurrency != 3 || ac.Isolation != IsolationBestEffort || len(ac.Masters) != 2 || ac.Grace != DefaultGrace ||
		ac.ClusterRebindAfter != 20*time.Second {
		t.Fatalf("agent config %+v", ac)
	}
	env := c.WorkerEnviron("/usr/bin")
	if !slices.Contains(env, "LANCE_CPU_THREADS=1") || !slices.Contains(env, "EXTRA=x") || !slices.Contains(env, "PATH=/usr/bin") ||
		slices.ContainsFunc(env, func(s string) bool { return strings.HasPrefix(s, "LANCEDB_LOG=") }) || !slices.IsSorted(env) {
		t.Fatalf("worker env %v", env)
	}
}

// By default workers log Lance's debug line that names the uuid of the index
// they build (the agent reads it from stderr).
func TestDefaultWorkerEnvAnnouncesTheIndexUUID(t *testing.T) {
	env := DefaultFileConfig().WorkerEnviron("/usr/bin")
	if !slices.Contains(env, "LANCEDB_LOG=error,lance::index::vector=debug,lance::file_audit=info") {
		t.Fatalf("worker env %v", env)
	}
	if c := DefaultFileConfig(); c.ClusterRebindAfter != DefaultClusterRebindAfter {
		t.Fatalf("cluster_rebind_after default %v", c.ClusterRebindAfter)
	}
}

func TestFileConfigErrors(t *testing.T) {
	if _, err := ParseFileConfig([]byte("listen: a\nlisten_typo: b\n")); err == nil {
		t.Fatal("unknown key accepted")
	}
	if _, err := ParseFileConfig([]byte("memory_limit: lots\n")); err == nil {
		t.Fatal("bad size accepted")
	}
	c, _ := ParseFileConfig([]byte("isolation: maybe\nconcurrency: 0\nmasters: [nohost]\nlog_format: xml\n"))
	err := c.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"listen is required", "data_dir", "isolation", "concurrency", "masters", "log_format"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %s: %v", want, err)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"1024": 1024, "1K": 1024, "2KiB": 2048, "1G": 1 << 30, "3Mi": 3 << 20, "10B": 10} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1T", "x", "99999999999G"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestDefaultWorker(t *testing.T) {
	got := DefaultWorker("/src/lancemaster/bin/lancemaster")
	if !slices.Equal(got, []string{"node", "/src/lancemaster/builders/lancedb/builder.js"}) {
		t.Fatal(got)
	}
}

func TestLoadFileConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "b.yaml")
	if err := os.WriteFile(p, []byte("listen: 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadFileConfig(p); err != nil || c.Listen != "127.0.0.1:1" {
		t.Fatal(c, err)
	}
	if _, err := LoadFileConfig(p + ".missing"); err == nil {
		t.Fatal("missing file accepted")
	}
}
