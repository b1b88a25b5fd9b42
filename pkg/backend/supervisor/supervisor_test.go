package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/testkit"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
)

func TestEchoTrustedResult(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		req := request(t, "echo")
		out := s.Run(context.Background(), req, time.Now().Add(time.Minute))
		wantOutcome(t, out, ProofChildReaped, "")
		if out.Result == nil || out.Result.Message != req.InvocationID || out.ExitCode != 0 || out.Signal != "" {
			t.Fatalf("want a trusted result echoing %q, got %+v", req.InvocationID, out)
		}
		if out.PID <= 0 || out.Duration <= 0 || out.PeakMemoryBytes <= 0 {
			t.Errorf("pid %d, duration %v, peak %d: want all > 0", out.PID, out.Duration, out.PeakMemoryBytes)
		}
		assertClean(t, s, out)
	})
}

// Each failure ends without a trusted result, with the child provably
// reaped, nothing left, and the supervisor still serving.
func TestFailuresLeaveNoTrustedResult(t *testing.T) {
	cases := []struct{ behaviour, failure, signal string }{
		{"exit3", "exit status 3", ""},
		{"noframe", "no result frame", ""},
		{"malformed", "malformed result frame", ""},
		{"oversized", "oversized result frame", ""},
		{"trailing", "trailing bytes after result frame", ""},
		{"segv", "signal SIGSEGV", "SIGSEGV"},
		{"abort", "signal SIGABRT", "SIGABRT"},
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("the SIGSEGV worker needs /bin/sh")
	}
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		for _, c := range cases {
			out := run(t, s, c.behaviour)
			wantOutcome(t, out, ProofChildReaped, c.failure)
			if out.Signal != c.signal {
				t.Errorf("%s: signal %q, want %q", c.behaviour, out.Signal, c.signal)
			}
			assertClean(t, s, out)
		}
		if out := run(t, s, "echo"); out.Result == nil {
			t.Fatalf("supervisor no longer serves: %+v", out)
		}
	})
}

func TestDeadlineTerminates(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		start := time.Now()
		out := s.Run(context.Background(), request(t, "hang"), start.Add(300*time.Millisecond))
		wantOutcome(t, out, ProofChildReaped, "deadline")
		if out.Signal != "SIGTERM" {
			t.Errorf("signal %q, want SIGTERM (the worker honours TERM)", out.Signal)
		}
		if el := time.Since(start); el < 300*time.Millisecond {
			t.Errorf("returned after %v, before the deadline", el)
		}
		assertClean(t, s, out)
	})
}

func TestIgnoredTermIsFollowedByKill(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		out := runUntilReady(t, s, request(t, "ignore-term"))
		wantOutcome(t, out, ProofChildReaped, "canceled")
		if out.Signal != "SIGKILL" {
			t.Errorf("signal %q, want SIGKILL", out.Signal)
		}
		assertClean(t, s, out)
	})
}

// Grandchildren that ignore SIGTERM — two in the worker's group, one in a
// group of its own, one in a session of its own — are all killed and reaped.
func TestGrandchildrenIgnoringTermAndEscapee(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		out := runUntilReady(t, s, request(t, "grandchildren"))
		wantOutcome(t, out, ProofChildReaped, "canceled")
		pids, escaped := sleeperPids(out.Stderr)
		if len(pids) != 4 || escaped != 2 {
			t.Fatalf("want 4 sleepers (2 escaped), stderr reports %v", pids)
		}
		assertGone(t, pids)
		assertClean(t, s, out)
	})
}

// A worker that answers and exits while a descendant (escaped into its own
// session) lingers: the result is trusted, the descendant is found through
// the subreaper, killed and reaped.
func TestLingeringEscapeeAfterResult(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		out := run(t, s, "linger")
		wantOutcome(t, out, ProofChildReaped, "")
		if out.Result == nil || out.Result.Message != "done" {
			t.Fatalf("want the trusted result, got %+v", out)
		}
		pids, escaped := sleeperPids(out.Stderr)
		if len(pids) != 2 || escaped != 1 {
			t.Fatalf("want 2 sleepers (1 escaped), stderr reports %v", pids)
		}
		assertGone(t, pids)
		assertClean(t, s, out)
	})
}

func TestMemoryLimitOOMKill(t *testing.T) {
	s := newSupervisor(t, modeCases[0], func(c *Config) { c.MemoryLimitBytes = 128 << 20 })
	out := run(t, s, "oom")
	wantOutcome(t, out, ProofChildReaped, "oom-killed")
	if !out.OOMKilled || out.Signal != "SIGKILL" {
		t.Errorf("OOMKilled %v signal %q, want true SIGKILL", out.OOMKilled, out.Signal)
	}
	// The kernel charges a cgroup in batches of up to 64 pages (256 KiB)
	// and reclaims after the charge, so the recorded peak may pass the
	// limit by less than a batch (CI saw 128 MiB + 4 KiB).
	const chargeBatch = 64 * 4096
	if out.PeakMemoryBytes < 100<<20 || out.PeakMemoryBytes > 128<<20+chargeBatch {
		t.Errorf("peak memory %d, want near the 128 MiB limit", out.PeakMemoryBytes)
	}
	assertClean(t, s, out)
}

// The worker is inside its invocation cgroup, limits set, from its first
// instruction (the helper joins before exec).
func TestWorkerStartsInsideLimitedCgroup(t *testing.T) {
	s := newSupervisor(t, modeCases[0], func(c *Config) { c.MemoryLimitBytes, c.PidsLimit = 300<<20, 77 })
	out := run(t, s, "whereami")
	wantOutcome(t, out, ProofChildReaped, "")
	var got map[string]string
	if err := json.Unmarshal([]byte(out.Result.Message), &got); err != nil {
		t.Fatalf("whereami answered %q: %v", out.Result.Message, err)
	}
	prefix := cgroupPrefix + itoa(os.Getpid()) + "-"
	for _, k := range []string{"memory_cgroup", "pids_cgroup"} {
		if s.Mode() == ModeCgroupV2 {
			k = "v2_cgroup"
		}
		if !strings.HasPrefix(filepath.Base(got[k]), prefix) {
			t.Errorf("%s = %q, want an invocation cgroup %s*", k, got[k], prefix)
		}
	}
	if got["memory_limit"] != itoa(300<<20) || got["pids_limit"] != "77" {
		t.Errorf("limits seen by the worker: memory %q pids %q", got["memory_limit"], got["pids_limit"])
	}
	assertClean(t, s, out)
}

func TestStderrFloodIsBounded(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		out := run(t, s, "flood")
		wantOutcome(t, out, ProofChildReaped, "")
		if len(out.Stderr) != DefaultStderrRingBytes || !bytes.HasSuffix(out.Stderr, []byte("tail-marker\n")) {
			t.Fatalf("stderr kept %d bytes ending %q; want the %d-byte tail", len(out.Stderr), tail(out.Stderr[max(0, len(out.Stderr)-20):]), DefaultStderrRingBytes)
		}
		assertClean(t, s, out)
	})
}

// A canary storage secret reaches the worker on stdin only: it is in no
// argv, no environment, no stderr tail, no result message, no log line.
func TestCanarySecretNeverLeaks(t *testing.T) {
	logger, logs := observedLogger()
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		s.log = logger
		secret := "canary-" + token + "-secret"
		req := request(t, "secret")
		req.StorageOptions = map[string]string{"aws_secret_access_key": secret, "region": "us"}
		done := make(chan Outcome, 1)
		go func() { done <- s.Run(context.Background(), req, time.Now().Add(time.Minute)) }()
		<-awaitFile(filepath.Join(req.DatasetURI, "ready"), 30*time.Second)
		procs := tokenProcs()
		if len(procs) == 0 {
			t.Error("the worker was not found while it ran")
		}
		for _, p := range procs {
			for _, f := range []string{"cmdline", "environ"} {
				b, _ := os.ReadFile("/proc/" + itoa(p) + "/" + f)
				if bytes.Contains(b, []byte(secret)) {
					t.Errorf("secret in /proc/%d/%s", p, f)
				}
			}
		}
		if err := os.WriteFile(filepath.Join(req.DatasetURI, "release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		out := <-done
		wantOutcome(t, out, ProofChildReaped, "")
		half := secret[:len(secret)/2]
		if bytes.Contains(out.Stderr, []byte(half)) || !bytes.Contains(out.Stderr, []byte("key="+redacted)) {
			t.Errorf("stderr not scrubbed: %q", out.Stderr)
		}
		if out.Result.Message != "used "+redacted {
			t.Errorf("result message %q, want it scrubbed", out.Result.Message)
		}
		testkit.NoSecretInLogs(t, logs, half)
		assertClean(t, s, out)
	})
}

func TestConcurrentRuns(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		behaviours := []string{"echo", "linger", "hang", "echo"}
		outs := make([]Outcome, len(behaviours))
		reqs := make([]*frame.Request, len(behaviours))
		var wg sync.WaitGroup
		for i, b := range behaviours {
			reqs[i] = request(t, b)
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := time.Minute
				if behaviours[i] == "hang" {
					d = 500 * time.Millisecond
				}
				outs[i] = s.Run(context.Background(), reqs[i], time.Now().Add(d))
			}()
		}
		wg.Wait()
		for i, out := range outs {
			switch behaviours[i] {
			case "echo":
				wantOutcome(t, out, ProofChildReaped, "")
				if out.Result.Message != reqs[i].InvocationID {
					t.Errorf("run %d got another run's result %q", i, out.Result.Message)
				}
			case "linger":
				wantOutcome(t, out, ProofChildReaped, "")
			case "hang":
				wantOutcome(t, out, ProofChildReaped, "deadline")
			}
		}
		assertClean(t, s, Outcome{})
	})
}

func itoa(n int) string { return strconv.Itoa(n) }
