package supervisor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLineWriterSplitsSkipsAndScrubs(t *testing.T) {
	var got []string
	l := &lineWriter{fn: func(b []byte) { got = append(got, string(b)) }, secrets: [][]byte{[]byte("s3cr3t-value")}}
	long := strings.Repeat("x", MaxStderrLineBytes+1)
	for _, chunk := range []string{"one\ntw", "o\r\n", long[:100], long[100:] + "\nkey=s3cr3t-value\n", "\n", "last"} {
		if n, err := l.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
	}
	l.flush() // EOF
	want := []string{"one", "two", "key=" + redacted, "last"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines %q, want %q", got, want)
	}
	l.stop()
	l.Write([]byte("after stop\n"))
	if len(got) != len(want) {
		t.Fatalf("a line reached the observer after stop: %q", got)
	}
}

// Run hands the worker's stderr lines to the observer of its context, as
// they arrive (the worker is still running when the first one is seen),
// scrubbed, and the ring still keeps the tail.
func TestStderrLinesReachTheObserverLive(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *Supervisor) {
		secret := "canary-" + token + "-lines"
		req := request(t, "secret")
		req.StorageOptions = map[string]string{"aws_secret_access_key": secret}
		var mu sync.Mutex
		var lines []string
		ctx := WithStderrLines(context.Background(), func(b []byte) { mu.Lock(); lines = append(lines, string(b)); mu.Unlock() })
		done := make(chan Outcome, 1)
		go func() { done <- s.Run(ctx, req, time.Now().Add(time.Minute)) }()
		<-awaitFile(filepath.Join(req.DatasetURI, "ready"), 30*time.Second)
		deadline := time.Now().Add(testWaitLines)
		for {
			mu.Lock()
			n := len(lines)
			mu.Unlock()
			if n >= 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the stderr lines did not reach the observer while the worker ran")
			}
			time.Sleep(2 * time.Millisecond)
		}
		if err := os.WriteFile(filepath.Join(req.DatasetURI, "release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		out := <-done
		wantOutcome(t, out, ProofChildReaped, "")
		mu.Lock()
		defer mu.Unlock()
		if len(lines) != 3 || lines[0] != "connecting with key="+redacted || lines[1] != "again "+redacted+"!" ||
			!strings.HasPrefix(lines[2], "cut short: ") || strings.Contains(lines[2], secret[:len(secret)/2]) {
			t.Fatalf("lines %q", lines)
		}
		if !bytes.Contains(out.Stderr, []byte("again "+redacted)) {
			t.Fatalf("the ring lost the stderr tail: %q", out.Stderr)
		}
		assertClean(t, s, out)
	})
}

const testWaitLines = 30 * time.Second
