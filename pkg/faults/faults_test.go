package faults

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/config"
)

var (
	flagSeed     = flag.Int64("faults.seed", -1, "run only this schedule seed (replay)")
	flagSeed0    = flag.Int64("faults.seed0", 1, "first seed of a run of schedules")
	flagSeeds    = flag.String("faults.seeds", "", "run these seeds (comma-separated), e.g. known regressions")
	flagCount    = flag.Int("faults.count", 4, "how many schedules to run (seeds seed0, seed0+1, …)")
	flagDuration = flag.Duration("faults.duration", 0, "run schedules for this long instead of -faults.count")
	flagSteps    = flag.Int("faults.steps", 12, "steps per schedule")
	flagVerbose  = flag.Bool("faults.v", false, "log every step as it runs and the components' warnings")
	flagParallel = flag.Int("faults.parallel", 1, "with -faults.duration: schedules run at once (each its own cluster)")
	flagDry      = flag.Bool("faults.dry", false, "print the schedules instead of running them")
	flagStore    = flag.String("faults.store", "", "run every schedule on this raft log store (boltdb or wal) instead of by the seed's parity")
)

// TestMain silences Thrift's default slog logger, which reports every
// connection a proxy or a kill closes mid-read as an error.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}

// TestFaultSchedules runs seeded fault schedules against an in-process
// cluster (docs/faults.md) and checks the invariants after each.
func TestFaultSchedules(t *testing.T) {
	if testing.Short() {
		t.Skip("fault schedules take seconds each")
	}
	if *flagStore != "" {
		if err := config.CheckRaftLogStore(*flagStore); err != nil {
			t.Fatalf("-faults.store: %v", err)
		}
	}
	switch {
	case *flagSeed >= 0:
		runSeed(t, *flagSeed)
	case *flagSeeds != "":
		for _, f := range strings.Split(*flagSeeds, ",") {
			seed, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("-faults.seeds: %v", err)
			}
			runSeed(t, seed)
		}
	case *flagDuration > 0:
		start := time.Now()
		var mu sync.Mutex
		n, failed, next := 0, 0, *flagSeed0
		var wg sync.WaitGroup
		for p := 0; p < max(1, *flagParallel); p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < *flagDuration {
					mu.Lock()
					seed := next
					next++
					mu.Unlock()
					ok := runSeed(t, seed)
					mu.Lock()
					n++
					if !ok {
						failed++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		summary := fmt.Sprintf("fault schedules: %d in %v (%.1f per minute, %d at a time), %d failed, seeds %d..%d",
			n, el.Round(time.Second), float64(n)/el.Minutes(), max(1, *flagParallel), failed, *flagSeed0, next-1)
		t.Log(summary)
		fmt.Println(summary)
		fmt.Println(crashFigureTotals())
	default:
		for i := 0; i < *flagCount; i++ {
			runSeed(t, *flagSeed0+int64(i))
		}
	}
}

// runSeed runs one schedule as a subtest and reports whether it passed.
func runSeed(t *testing.T, seed int64) bool {
	return t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
		steps := generate(seed, *flagSteps)
		if *flagDry {
			for i, s := range steps {
				t.Logf("%2d %s", i, s)
			}
			return
		}
		w := newWorld(t, seed, *flagVerbose)
		start := time.Now()
		w.setup()
		e := newExecution(w, steps)
		func() {
			defer w.teardown()
			e.run()
			e.heal()
			e.converge()
			vs := e.check()
			crash := e.addCrashFigures()
			if len(vs) == 0 {
				t.Logf("seed %d (%s): %d steps, %s, %s, %v", seed, w.logStore(), len(steps), e.summary(), crash, time.Since(start).Round(time.Millisecond))
				return
			}
			var b strings.Builder
			fmt.Fprintf(&b, "seed %d (raft log store %s): %d invariant violation(s)\n", seed, w.logStore(), len(vs))
			fmt.Fprintf(&b, "replay: go test -race ./pkg/faults -run 'TestFaultSchedules' -faults.seed=%d -faults.steps=%d%s -v\n", seed, *flagSteps, storeFlag())
			for _, v := range vs {
				fmt.Fprintf(&b, "  VIOLATION %s\n", v)
			}
			b.WriteString("schedule:\n")
			for i, s := range steps {
				fmt.Fprintf(&b, "  %2d %s\n", i, s)
			}
			b.WriteString("what happened:\n")
			w.mu.Lock()
			for _, l := range w.log {
				fmt.Fprintf(&b, "  %s\n", l)
			}
			w.mu.Unlock()
			fmt.Fprintf(&b, "summary: %s\n", e.summary())
			t.Error(b.String())
		}()
	})
}
