package backend

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// maxConfigFile bounds the configuration file read.
const maxConfigFile = 1 << 20

// FileConfig is the backend's configuration file (YAML, docs/backend.md),
// overridden by flags in cmd/lancemaster. Unknown keys are errors. Durations
// are Go durations ("60s", "1h"); memory_limit takes a byte count or a
// binary size ("512MiB", "1GiB", "1G").
type FileConfig struct {
	Listen          string        `yaml:"listen"`
	Advertise       string        `yaml:"advertise"`   // default: listen
	HTTPListen      string        `yaml:"http_listen"` // /metrics, /livez, /readyz; optional
	DataDir         string        `yaml:"data_dir"`
	Masters         []string      `yaml:"masters"`
	Concurrency     int           `yaml:"concurrency"`
	QueueSize       int           `yaml:"queue_size"`
	InspectTimeout  time.Duration `yaml:"inspect_timeout"`
	Grace           time.Duration `yaml:"grace"`
	OutboxGrace     time.Duration `yaml:"outbox_grace"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// ClusterRebindAfter: how long the bound cluster must be silent before
	// another cluster's heartbeat re-binds the backend (cluster.go).
	ClusterRebindAfter time.Duration `yaml:"cluster_rebind_after"`

	// Worker isolation (the supervisor).
	Isolation    string            `yaml:"isolation"` // required | best-effort
	MemoryLimit  ByteSize          `yaml:"memory_limit"`
	PidsLimit    int64             `yaml:"pids_limit"`
	KillGrace    time.Duration     `yaml:"kill_grace"`
	CgroupParent string            `yaml:"cgroup_parent"`
	Worker       []string          `yaml:"worker"`     // argv; default DefaultWorker
	WorkerDir    string            `yaml:"worker_dir"` // working directory of workers
	WorkerEnv    map[string]string `yaml:"worker_env"` // merged over DefaultWorkerEnv

	LogFormat string `yaml:"log_format"` // json | console
	LogLevel  string `yaml:"log_level"`  // debug | info | warn | error

	// TLS: ca, cert (role backend) and key turn on mutual TLS for the
	// backend's listener and its reports; unset means plaintext.
	TLS rpc.TLSFiles `yaml:"tls"`
}

// DefaultFileConfig is the starting point: every default set, no addresses.
func DefaultFileConfig() *FileConfig {
	return &FileConfig{
		Concurrency: DefaultConcurrency, QueueSize: DefaultQueueSize, InspectTimeout: DefaultInspectTimeout,
		Grace: DefaultGrace, ShutdownTimeout: DefaultShutdownTimeout, ClusterRebindAfter: DefaultClusterRebindAfter,
		Isolation: IsolationRequired,
		LogFormat: "json", LogLevel: "info",
	}
}

// LoadFileConfig reads path over DefaultFileConfig. It does not validate:
// apply flags, then call Validate.
func LoadFileConfig(path string) (*FileConfig, error) {
	c := DefaultFileConfig()
	if err := config.LoadYAML("backend config", path, maxConfigFile, c); err != nil {
		return nil, err
	}
	return c, nil
}

// ParseFileConfig decodes YAML over DefaultFileConfig, as LoadFileConfig does.
func ParseFileConfig(data []byte) (*FileConfig, error) {
	c := DefaultFileConfig()
	if err := config.DecodeYAML(data, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate fills the derived defaults (advertise from listen) and checks
// everything, returning every problem at once.
func (c *FileConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("config: "+format, args...)) }
	if c.Listen == "" {
		bad("listen is required (host:port)")
	} else if err := checkHostPortBind(c.Listen); err != nil {
		bad("listen: %v", err)
	}
	if c.Advertise == "" {
		c.Advertise = c.Listen
	}
	if c.Advertise != "" {
		if err := checkHostPort(c.Advertise); err != nil {
			bad("advertise: %v", err)
		}
	}
	if c.HTTPListen != "" {
		if err := checkHostPortBind(c.HTTPListen); err != nil {
			bad("http_listen: %v", err)
		}
	}
	if c.DataDir == "" {
		bad("data_dir is required")
	}
	if len(c.Masters) == 0 {
		bad("masters is empty: list the masters' RPC addresses (reports go there until heartbeats name them)")
	}
	for _, m := range c.Masters {
		if err := checkHostPort(m); err != nil {
			bad("masters: %v", err)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"concurrency", c.Concurrency}, {"queue_size", c.QueueSize}} {
		if n.v < 1 || n.v > 1024 {
			bad("%s %d: use 1..1024", n.name, n.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"inspect_timeout", c.InspectTimeout}, {"grace", c.Grace}, {"outbox_grace", c.OutboxGrace},
		{"shutdown_timeout", c.ShutdownTimeout}, {"kill_grace", c.KillGrace}, {"cluster_rebind_after", c.ClusterRebindAfter}} {
		if d.v < 0 {
			bad("%s %v: must not be negative", d.name, d.v)
		}
	}
	if c.Isolation != IsolationRequired && c.Isolation != IsolationBestEffort {
		bad("isolation %q: use %s or %s", c.Isolation, IsolationRequired, IsolationBestEffort)
	}
	if c.MemoryLimit < 0 || c.PidsLimit < 0 {
		bad("memory_limit and pids_limit must not be negative")
	}
	if len(c.Worker) > 0 && c.Worker[0] == "" {
		bad("worker: the command is empty")
	}
	for k := range c.WorkerEnv {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			bad("worker_env: %q is not a variable name", k)
		}
	}
	if err := c.TLS.Validate(); err != nil {
		bad("%v", err)
	}
	switch c.LogFormat {
	case "json", "console":
	default:
		bad("log_format %q: use json or console", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level %q: use debug, info, warn or error", c.LogLevel)
	}
	return errors.Join(errs...)
}

// AgentConfig is the Agent configuration of c (Logger and RPC left to the
// caller).
func (c *FileConfig) AgentConfig() Config {
	return Config{
		ListenAddr: c.Listen, AdvertiseAddr: c.Advertise, HTTPListen: c.HTTPListen, DataDir: c.DataDir, Masters: slices.Clone(c.Masters),
		Concurrency: c.Concurrency, QueueSize: c.QueueSize, InspectTimeout: c.InspectTimeout, Grace: c.Grace,
		OutboxGrace: c.OutboxGrace, ShutdownTimeout: c.ShutdownTimeout, Isolation: c.Isolation,
		ClusterRebindAfter: c.ClusterRebindAfter,
	}
}

// DefaultWorker is the builder's argv when the file names none:
// node <repo>/builders/lancedb/builder.js, the repository being the parent
// of the directory holding the executable (bin/lancemaster after
// `make build`).
func DefaultWorker(executable string) []string {
	repo := filepath.Dir(filepath.Dir(executable))
	return []string{"node", filepath.Join(repo, "builders", "lancedb", "builder.js")}
}

// DefaultWorkerEnv is the worker's environment before worker_env: the
// agent's PATH (nothing else is inherited), small, fixed thread pools, so
// a worker's thread count stays well under pids_limit, and a LANCEDB_LOG
// that keeps errors plus Lance's debug line naming the uuid of the index
// being built (the agent reads it from stderr, progress.go).
func DefaultWorkerEnv(path string) map[string]string {
	return map[string]string{
		"PATH":                 path,
		"LANCE_CPU_THREADS":    "2",
		"LANCE_IO_THREADS":     "4",
		"RAYON_NUM_THREADS":    "2",
		"TOKIO_WORKER_THREADS": "2",
		"UV_THREADPOOL_SIZE":   "2",
		"LANCEDB_LOG":          frame.LanceLogEnv,
	}
}

// WorkerEnviron is DefaultWorkerEnv(path) with worker_env merged over it
// (an empty value removes a variable), as sorted KEY=VALUE pairs.
func (c *FileConfig) WorkerEnviron(path string) []string {
	env := DefaultWorkerEnv(path)
	maps.Copy(env, c.WorkerEnv)
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if env[k] != "" {
			out = append(out, k+"="+env[k])
		}
	}
	return out
}

func checkHostPortBind(s string) error {
	// A bind address may leave the host empty (all interfaces).
	if strings.HasPrefix(s, ":") {
		return checkHostPort("0.0.0.0" + s)
	}
	return checkHostPort(s)
}

// ByteSize is a size in bytes, written as a number or with a binary suffix:
// K/KiB, M/MiB, G/GiB (powers of 1024).
type ByteSize int64

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

// ParseByteSize parses "1073741824", "512MiB", "1G", "64Ki"...
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10},
		{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: use a byte count or a number with K, M or G (KiB, MiB, GiB)", s)
	}
	return ByteSize(n * mult), nil
}
