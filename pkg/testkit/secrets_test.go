package testkit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

const canary = "canary-5ecret-value"

// fakeTB records a failure instead of ending the test.
type fakeTB struct {
	testing.TB
	failed []string
}

func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Fatalf(format string, a ...any) { f.failed = append(f.failed, format) }
func (f *fakeTB) Errorf(format string, a ...any) { f.failed = append(f.failed, format) }

// A secret is found in the message, in a string field, inside an error and
// inside a structured field; a clean log passes.
func TestNoSecretInLogsFindsItInEveryShapeOfField(t *testing.T) {
	for name, field := range map[string]zap.Field{
		"message": zap.Skip(),
		"string":  zap.String("k", "x "+canary),
		"error":   zap.Error(errors.New("dial: " + canary)),
		"struct":  zap.Any("opts", map[string]string{"aws_secret_access_key": canary}),
		"strings": zap.Strings("list", []string{"a", canary}),
	} {
		core, logs := observer.New(zapcore.DebugLevel)
		msg := "hello"
		if name == "message" {
			msg += " " + canary
		}
		zap.New(core).Info(msg, field)
		tb := &fakeTB{}
		NoSecretInLogs(tb, logs, canary)
		if len(tb.failed) == 0 {
			t.Errorf("%s: the secret was not found in %q", name, LogLines(logs))
		}
		if strings.Contains(strings.Join(tb.failed, ""), canary) {
			t.Errorf("%s: the failure message prints the whole secret", name)
		}
	}
	core, logs := observer.New(zapcore.DebugLevel)
	zap.New(core).Info("clean", zap.String("k", "v"))
	tb := &fakeTB{}
	NoSecretInLogs(tb, logs, canary)
	if len(tb.failed) != 0 {
		t.Fatalf("a clean log failed: %v", tb.failed)
	}
}

func TestNoSecretInFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "clean"), []byte("nothing"), 0o600)
	tb := &fakeTB{}
	if n := NoSecretInFiles(tb, []string{dir}, canary); n != 1 || len(tb.failed) != 0 {
		t.Fatalf("clean dir: %d files, failures %v", n, tb.failed)
	}
	os.WriteFile(filepath.Join(dir, "sub", "leak"), []byte("x"+canary+"y"), 0o600)
	if n := NoSecretInFiles(tb, []string{dir}, canary); n != 2 || len(tb.failed) != 1 {
		t.Fatalf("leaky dir: %d files, failures %v", n, tb.failed)
	}
}
