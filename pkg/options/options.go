// Package options holds the cluster-wide options of DESIGN.md §11: their
// keys and specs, validated when set (Validate, on the leader), checked when
// journaled (CheckStored, in Apply) and clamped when read (Resolve). It is
// pure and a leaf: the journal reads options without reading files.
package options

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Cluster-wide option keys (DESIGN.md §11). They are replicated in the FSM,
// validated when set and clamped again when read.
const (
	OptEnableMutation          = "enable_lance_index_mutation"
	OptEnableLocalFileMutation = "enable_lance_index_local_file_mutation"
	OptDispatcherPaused        = "lance_index_job_dispatcher_paused"
	OptDispatchIntervalSecond  = "lance_index_job_dispatch_interval_second"
	OptExecuteDeadlineSecond   = "lance_index_job_execute_deadline_second"
	OptMaxDispatchPerRound     = "lance_index_job_max_dispatch_per_round"
	OptMaxInflightPerBackend   = "lance_index_job_max_inflight_per_backend"
	OptRefreshRetrySecond      = "lance_index_job_refresh_retry_second"
	OptMaxUnresolvedPerTable   = "lance_index_job_max_unresolved_per_table"
	OptMaxUnresolvedPerCatalog = "lance_index_job_max_unresolved_per_catalog"
	OptMaxUnresolvedGlobal     = "lance_index_job_max_unresolved_global"
	OptMaxNumPartitions        = "lance_index_max_num_partitions"
	OptMaxNumSubVectors        = "lance_index_max_num_sub_vectors"
	OptKeepMaxSecond           = "lance_index_job_keep_max_second"
	OptCleanIntervalSecond     = "lance_index_job_clean_interval_second"
	OptMaxDispatchAttempts     = "lance_index_job_max_dispatch_attempts"
	OptTrustExclusiveWriter    = "lance_index_job_trust_exclusive_writer"
	OptResolveGraceSecond      = "lance_index_job_resolve_grace_second"

	// Bounds of the index parameters that cost a backend memory or CPU
	// (docs/index-types.md), and the deadline of HNSW builds.
	OptMaxHNSWM                  = "lance_index_max_hnsw_m"
	OptMaxHNSWEfConstruction     = "lance_index_max_hnsw_ef_construction"
	OptMaxSampleRate             = "lance_index_max_sample_rate"
	OptMaxMaxIterations          = "lance_index_max_max_iterations"
	OptMaxFTSTokenLength         = "lance_index_max_fts_token_length"
	OptHNSWExecuteDeadlineSecond = "lance_index_job_hnsw_execute_deadline_second"

	// The audit trail (pkg/raftfsm/audit.go): how many events are kept.
	OptAuditRetentionCount = "audit_retention_count"
)

// Kind is how an option's value is parsed.
type Kind int

const (
	KindBool Kind = iota
	KindPositiveInt
)

// Spec describes one cluster-wide option.
type Spec struct {
	Key         string
	Kind        Kind
	Default     string
	Description string
}

// maxOptionInt bounds numeric options so no product of them overflows.
const maxOptionInt = 1 << 40

var specs = []Spec{
	{OptEnableMutation, KindBool, "true", "admission kill switch: when false, create-index and drop-index are refused"},
	{OptEnableLocalFileMutation, KindBool, "false", "operator assertion that local-file datasets are shared with the one registered backend"},
	{OptDispatcherPaused, KindBool, "false", "when true, PENDING jobs are not dispatched (sweeps and refresh still run)"},
	{OptDispatchIntervalSecond, KindPositiveInt, "10", "seconds between dispatch rounds when nothing wakes the dispatcher"},
	{OptExecuteDeadlineSecond, KindPositiveInt, "3600", "seconds a dispatched job may run before it is given up as UNKNOWN"},
	{OptMaxDispatchPerRound, KindPositiveInt, "16", "jobs made RUNNING per dispatch round at most"},
	{OptMaxInflightPerBackend, KindPositiveInt, "2", "possible-live slots a backend may hold"},
	{OptRefreshRetrySecond, KindPositiveInt, "300", "seconds a FAILED refresh waits before it is retried"},
	{OptMaxUnresolvedPerTable, KindPositiveInt, "8", "unresolved jobs allowed per table"},
	{OptMaxUnresolvedPerCatalog, KindPositiveInt, "64", "unresolved jobs allowed per catalog"},
	{OptMaxUnresolvedGlobal, KindPositiveInt, "256", "unresolved jobs allowed in the cluster"},
	{OptMaxNumPartitions, KindPositiveInt, "4096", "upper bound of num_partitions (every IVF_* type)"},
	{OptMaxNumSubVectors, KindPositiveInt, "256", "upper bound of num_sub_vectors (IVF_PQ, IVF_HNSW_PQ)"},
	// The defaults below are a few times the library's own defaults (m 20,
	// ef_construction 300, sample_rate 256, max_iterations 50, token length
	// 40): room to tune, but no request can make one build take a backend's
	// memory (m, sample_rate x num_partitions vectors held for training) or
	// its CPU for hours (ef_construction, max_iterations).
	{OptMaxHNSWM, KindPositiveInt, "64", "upper bound of m, the HNSW graph's neighbours per node (IVF_HNSW_SQ, IVF_HNSW_PQ)"},
	{OptMaxHNSWEfConstruction, KindPositiveInt, "1000", "upper bound of ef_construction, the HNSW build's candidate list (IVF_HNSW_SQ, IVF_HNSW_PQ)"},
	{OptMaxSampleRate, KindPositiveInt, "1024", "upper bound of sample_rate, vectors per partition sampled to train IVF (every IVF_* type)"},
	{OptMaxMaxIterations, KindPositiveInt, "200", "upper bound of max_iterations of IVF k-means training (every IVF_* type)"},
	{OptMaxFTSTokenLength, KindPositiveInt, "256", "upper bound of FTS max_token_length, ngram_min_length and ngram_max_length"},
	{OptHNSWExecuteDeadlineSecond, KindPositiveInt, "14400", "seconds a dispatched IVF_HNSW_SQ or IVF_HNSW_PQ job may run before it is given up as UNKNOWN (HNSW builds are many times slower than IVF_PQ)"},
	{OptAuditRetentionCount, KindPositiveInt, "10000", "audit events kept (admin changes: who, when, what); recording one more removes the oldest"},
	{OptKeepMaxSecond, KindPositiveInt, "604800", "seconds a resolved job is kept before retention GC removes it"},
	{OptCleanIntervalSecond, KindPositiveInt, "3600", "seconds between retention GC passes"},
	{OptMaxDispatchAttempts, KindPositiveInt, "5", "dispatches proven never enqueued (refused, unreachable) before a job ends NOT_COMMITTED; each earlier one returns it to PENDING"},
	{OptTrustExclusiveWriter, KindBool, "false", "operator assertion that no writer outside lancemaster creates or drops index names: then a DROP can be proven COMMITTED from the dataset"},
	{OptResolveGraceSecond, KindPositiveInt, "30", "seconds after a worker on an object-store dataset is gone before its outcome is read from the dataset (a PUT already sent may still land)"},
}

var specByKey = func() map[string]Spec {
	m := make(map[string]Spec, len(specs))
	for _, s := range specs {
		m[s.Key] = s
	}
	return m
}()

// Specs returns every option, sorted by key.
func Specs() []Spec {
	out := append([]Spec(nil), specs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Lookup returns the spec of key.
func Lookup(key string) (Spec, bool) {
	s, ok := specByKey[key]
	return s, ok
}

// Error is a rejected option; the admin API maps it to INVALID.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// Validate checks a value for key and returns its canonical spelling
// ("true"/"false", a decimal integer). Unknown keys and non-positive numbers
// are rejected.
func Validate(key, value string) (string, error) {
	spec, ok := specByKey[key]
	if !ok {
		return "", &Error{fmt.Sprintf("unknown option %q", truncate(key))}
	}
	v := strings.TrimSpace(value)
	switch spec.Kind {
	case KindBool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "", &Error{fmt.Sprintf("%s must be true or false", key)}
		}
		return strconv.FormatBool(b), nil
	default:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", &Error{fmt.Sprintf("%s must be a positive integer", key)}
		}
		if n < 1 || n > maxOptionInt {
			return "", &Error{fmt.Sprintf("%s must be between 1 and %d; got %d", key, int64(maxOptionInt), n)}
		}
		return strconv.FormatInt(n, 10), nil
	}
}

// Stored option bounds: what Apply checks of a journaled option. Nothing
// here depends on which options a release knows, so replicas of different
// versions store the same bytes (a key this release does not know is kept
// verbatim and simply not read).
const (
	MaxOptionKeyBytes   = 128
	MaxOptionValueBytes = 256
)

// CheckStored is the only check Apply makes of a journaled option: a
// key of 1..128 bytes of [a-z0-9_] and a value of at most 256 bytes of
// printable ASCII. The leader validates (Validate) before proposing;
// every reader clamps (Resolve).
func CheckStored(key, value string) error {
	if key == "" || len(key) > MaxOptionKeyBytes {
		return &Error{fmt.Sprintf("an option key must be 1 to %d bytes", MaxOptionKeyBytes)}
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return &Error{"an option key is lowercase letters, digits and '_'"}
		}
	}
	if len(value) > MaxOptionValueBytes {
		return &Error{fmt.Sprintf("option %s: the value is longer than %d bytes", key, MaxOptionValueBytes)}
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 || c > 0x7e {
			return &Error{fmt.Sprintf("option %s: the value is not printable ASCII", key)}
		}
	}
	return nil
}

// Options are the cluster-wide options as a leader service reads them: every
// number clamped to at least 1 (and at most maxOptionInt), whatever is stored.
type Options struct {
	EnableMutation          bool
	EnableLocalFileMutation bool
	DispatcherPaused        bool
	DispatchIntervalSecond  int64
	ExecuteDeadlineSecond   int64
	MaxDispatchPerRound     int64
	MaxInflightPerBackend   int64
	RefreshRetrySecond      int64
	MaxUnresolvedPerTable   int64
	MaxUnresolvedPerCatalog int64
	MaxUnresolvedGlobal     int64
	MaxNumPartitions        int64
	MaxNumSubVectors        int64
	KeepMaxSecond           int64
	CleanIntervalSecond     int64
	MaxDispatchAttempts     int64
	TrustExclusiveWriter    bool
	ResolveGraceSecond      int64
	MaxHNSWM                int64
	MaxHNSWEfConstruction   int64
	MaxSampleRate           int64
	MaxMaxIterations        int64
	MaxFTSTokenLength       int64
	// HNSWExecuteDeadlineSecond replaces ExecuteDeadlineSecond for the
	// IVF_HNSW_* types (ExecuteDeadlineSecondOf chooses).
	HNSWExecuteDeadlineSecond int64
	// AuditRetentionCount is how many audit events the journal keeps.
	AuditRetentionCount int64
}

// IndexLimits are the options that bound index parameters. Its fields are
// job.Limits' (same names, types and order), so job.Limits(o.IndexLimits())
// converts without this leaf importing pkg/job.
type IndexLimits struct {
	MaxNumPartitions      int64
	MaxNumSubVectors      int64
	MaxHNSWM              int64
	MaxHNSWEfConstruction int64
	MaxSampleRate         int64
	MaxMaxIterations      int64
	MaxFTSTokenLength     int64
}

// IndexLimits returns the bounds of index parameters in force.
func (o Options) IndexLimits() IndexLimits {
	return IndexLimits{
		MaxNumPartitions: o.MaxNumPartitions, MaxNumSubVectors: o.MaxNumSubVectors,
		MaxHNSWM: o.MaxHNSWM, MaxHNSWEfConstruction: o.MaxHNSWEfConstruction,
		MaxSampleRate: o.MaxSampleRate, MaxMaxIterations: o.MaxMaxIterations, MaxFTSTokenLength: o.MaxFTSTokenLength,
	}
}

// ExecuteDeadlineSecondOf is how long a dispatched job of indexType (a
// canonical type, "" for a DROP) may run before it is given up:
// HNSWExecuteDeadlineSecond for IVF_HNSW_SQ and IVF_HNSW_PQ, whose builds
// are 10-40x slower than IVF_PQ's, ExecuteDeadlineSecond for every other.
func (o Options) ExecuteDeadlineSecondOf(indexType string) int64 {
	if strings.HasPrefix(indexType, "IVF_HNSW_") { // job.IsHNSWIndex (pinned by a test)
		return o.HNSWExecuteDeadlineSecond
	}
	return o.ExecuteDeadlineSecond
}

// Resolve reads stored values (only those set; missing keys take
// their defaults) into Options, clamping every number to [1, maxOptionInt].
// A value that does not parse reads as the default.
func Resolve(stored map[string]string) Options {
	b := func(k string) bool {
		if v, ok := stored[k]; ok {
			if x, err := strconv.ParseBool(v); err == nil {
				return x
			}
		}
		x, _ := strconv.ParseBool(specByKey[k].Default)
		return x
	}
	n := func(k string) int64 {
		x, err := strconv.ParseInt(stored[k], 10, 64)
		if _, ok := stored[k]; !ok || err != nil {
			x, _ = strconv.ParseInt(specByKey[k].Default, 10, 64)
		}
		return Clamp(x)
	}
	return Options{
		EnableMutation:          b(OptEnableMutation),
		EnableLocalFileMutation: b(OptEnableLocalFileMutation),
		DispatcherPaused:        b(OptDispatcherPaused),
		DispatchIntervalSecond:  n(OptDispatchIntervalSecond),
		ExecuteDeadlineSecond:   n(OptExecuteDeadlineSecond),
		MaxDispatchPerRound:     n(OptMaxDispatchPerRound),
		MaxInflightPerBackend:   n(OptMaxInflightPerBackend),
		RefreshRetrySecond:      n(OptRefreshRetrySecond),
		MaxUnresolvedPerTable:   n(OptMaxUnresolvedPerTable),
		MaxUnresolvedPerCatalog: n(OptMaxUnresolvedPerCatalog),
		MaxUnresolvedGlobal:     n(OptMaxUnresolvedGlobal),
		MaxNumPartitions:        n(OptMaxNumPartitions),
		MaxNumSubVectors:        n(OptMaxNumSubVectors),
		KeepMaxSecond:           n(OptKeepMaxSecond),
		CleanIntervalSecond:     n(OptCleanIntervalSecond),
		MaxDispatchAttempts:     n(OptMaxDispatchAttempts),
		TrustExclusiveWriter:    b(OptTrustExclusiveWriter),
		ResolveGraceSecond:      n(OptResolveGraceSecond),
		MaxHNSWM:                n(OptMaxHNSWM),
		MaxHNSWEfConstruction:   n(OptMaxHNSWEfConstruction),
		MaxSampleRate:           n(OptMaxSampleRate),
		MaxMaxIterations:        n(OptMaxMaxIterations),
		MaxFTSTokenLength:       n(OptMaxFTSTokenLength),

		HNSWExecuteDeadlineSecond: n(OptHNSWExecuteDeadlineSecond),
		AuditRetentionCount:       n(OptAuditRetentionCount),
	}
}

// Clamp bounds a numeric option to [1, maxOptionInt] so that no stored value
// can stop or busy-spin a leader service.
func Clamp(x int64) int64 {
	if x < 1 {
		return 1
	}
	if x > maxOptionInt {
		return maxOptionInt
	}
	return x
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// RegisterForTest adds an option spec (as a later release would know
// it) and returns the function that removes it again. Tests only: it is not
// safe while other goroutines read the option table.
func RegisterForTest(s Spec) (restore func()) {
	specs = append(specs, s)
	specByKey[s.Key] = s
	return func() {
		specs = specs[:len(specs)-1]
		delete(specByKey, s.Key)
	}
}
