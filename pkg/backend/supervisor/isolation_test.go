package supervisor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
)

// Required isolation without writable cgroups: New succeeds, Verified is
// false with a reason, and every Run is refused before anything starts.
func TestRequiredIsolationUnavailable(t *testing.T) {
	for _, parent := range []string{t.TempDir(), "/sys/fs/cgroup/not-a-hierarchy/x", "relative/path"} {
		cfg := baseConfig(t)
		cfg.CgroupParent = parent
		s, err := New(cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if s.Verified() || s.Mode() != ModeProcessGroup || s.Reason() == "" {
			t.Fatalf("parent %s: verified %v mode %s reason %q; want unverified process-group with a reason", parent, s.Verified(), s.Mode(), s.Reason())
		}
		out := run(t, s, "echo")
		wantOutcome(t, out, ProofNeverLaunched, "isolation not verified")
		assertClean(t, s, out)
	}
	if _, err := os.Stat("/sys/fs/cgroup/not-a-hierarchy"); err == nil {
		t.Error("a directory was created outside cgroup filesystems")
	}
}

// Best-effort isolation falls back to a process group and still runs.
func TestBestEffortFallsBackToProcessGroup(t *testing.T) {
	logger, logs := observedLogger()
	cfg := baseConfig(t)
	cfg.Isolation, cfg.CgroupParent, cfg.Logger = IsolationBestEffort, t.TempDir(), logger
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Verified() || s.Mode() != ModeProcessGroup {
		t.Fatalf("verified %v mode %s", s.Verified(), s.Mode())
	}
	if n := logs.FilterMessageSnippet("falls back to a process group").Len(); n != 1 {
		t.Errorf("want one fallback warning, got %d", n)
	}
	t.Cleanup(killLeftovers)
	out := run(t, s, "echo")
	wantOutcome(t, out, ProofChildReaped, "")
	assertClean(t, s, out)
}

// On cgroup v1 a host binary that does not run the helper (here /bin/true
// stands in for it) is caught at New: isolation is not verified, and says
// why.
func TestHelperNotWiredIsDetected(t *testing.T) {
	s := newSupervisor(t, modeCases[0])
	if s.Mode() != ModeCgroupV1 {
		t.Skipf("the re-exec helper is used on cgroup v1 only (mode %s)", s.Mode())
	}
	selfExe = "/bin/true"
	defer func() { selfExe = "/proc/self/exe" }()
	s2, err := New(baseConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if s2.Verified() || !strings.Contains(s2.Reason(), "MaybeRunHelper") {
		t.Fatalf("verified %v reason %q; want unverified naming MaybeRunHelper", s2.Verified(), s2.Reason())
	}
	assertClean(t, s2, Outcome{})
}

// NEVER_LAUNCHED: before fork (missing executable, expired deadline,
// oversized request) and after fork but before the worker's execve (a file
// the kernel cannot execute).
func TestNeverLaunched(t *testing.T) {
	bogus := filepath.Join(t.TempDir(), "not-an-executable")
	if err := os.WriteFile(bogus, []byte("\x00\x01\x02\x03 garbage"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mc := range modeCases {
		t.Run(mc.name, func(t *testing.T) {
			s := newSupervisor(t, mc)
			for _, cmd := range [][]string{{"/nonexistent/lancedb-builder"}, {"no-such-builder-on-path"}, {bogus}} {
				s.cfg.Command = cmd
				out := run(t, s, "echo")
				wantOutcome(t, out, ProofNeverLaunched, "spawn failed")
				assertClean(t, s, out)
			}
			exe, _ := os.Executable()
			s.cfg.Command = []string{exe}
			out := s.Run(context.Background(), request(t, "echo"), time.Now().Add(-time.Second))
			wantOutcome(t, out, ProofNeverLaunched, "deadline")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			out = s.Run(ctx, request(t, "echo"), time.Time{})
			wantOutcome(t, out, ProofNeverLaunched, "canceled")
			big := request(t, "echo")
			big.StorageOptions = map[string]string{"k": strings.Repeat("x", frame.MaxRequestBytes)}
			out = s.Run(context.Background(), big, time.Time{})
			wantOutcome(t, out, ProofNeverLaunched, "request too large")
			assertClean(t, s, out)
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, c := range []Config{{}, {Command: []string{"x"}, Isolation: "strict"}, {Command: []string{"x"}, PidsLimit: -1}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

func TestRingKeepsTail(t *testing.T) {
	r := newRing(8)
	_, _ = r.Write([]byte("abc"))
	if b, cut := r.tail(); string(b) != "abc" || cut {
		t.Fatalf("got %q %v", b, cut)
	}
	_, _ = r.Write([]byte("defgh"))
	_, _ = r.Write([]byte("ij"))
	if b, cut := r.tail(); string(b) != "cdefghij" || !cut {
		t.Fatalf("got %q %v", b, cut)
	}
	_, _ = r.Write([]byte("0123456789"))
	if b, _ := r.tail(); string(b) != "23456789" {
		t.Fatalf("got %q", b)
	}
}

func TestScrub(t *testing.T) {
	secrets := secretValues(&frame.Request{StorageOptions: map[string]string{
		"key": "SECRETKEY123", "long": "SECRETKEY123-and-more", "region": "us", "flag": "true",
	}})
	if len(secrets) != 3 || string(secrets[0]) != "SECRETKEY123-and-more" {
		t.Fatalf("secrets %q: want values ≥ 4 bytes, longest first", secrets)
	}
	cases := []struct {
		in   string
		cut  bool
		want string
	}{
		{"k=SECRETKEY123 l=SECRETKEY123-and-more us", false, "k=[REDACTED] l=[REDACTED] us"},
		{"TKEY123 rest", true, "[REDACTED] rest"},                       // a secret's end at a cut start
		{"TKEY123 rest", false, "TKEY123 rest"},                         // not cut: a plain word
		{"rest SECRETK", false, "rest [REDACTED]"},                      // a write cut short
		{"rest SEC", false, "rest SEC"},                                 // < 4 bytes: not a fragment
		{"RETKEY123-and-m", true, "[REDACTED]"},                         // all inside one secret
		{"x true us y", false, "x [REDACTED] us y"},                     // ≥ 4 bytes is scrubbed, shorter is not
		{"KEY123-and-more SECRETKEY123", true, "[REDACTED] [REDACTED]"}, // both edges
	}
	for _, c := range cases {
		if got := string(scrub([]byte(c.in), secrets, c.cut)); got != c.want {
			t.Errorf("scrub(%q, cut=%v) = %q, want %q", c.in, c.cut, got, c.want)
		}
	}
	for _, s := range secrets {
		if bytes.Contains(scrub([]byte("a"+string(s)+"b"), secrets, true), s) {
			t.Errorf("secret %q survived", s)
		}
	}
}
