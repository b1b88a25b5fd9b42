package testkit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest/observer"
)

// Secret scanners: a storage credential or an invocation secret must never
// reach a log line, an error, an answer or a file on disk. These render
// what a test captured as plain text and look for the secret in it.

// LogLines renders each observed entry as one line: its message, then every
// field as key=value — a string as is, an error by its message, anything
// else as JSON — with newlines folded, so a secret is found wherever zap
// put it.
func LogLines(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.All() {
		var b strings.Builder
		b.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			b.WriteString(" " + k + "=" + strings.ReplaceAll(fieldText(v), "\n", " "))
		}
		out = append(out, b.String())
	}
	return out
}

func fieldText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case error:
		return x.Error()
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// NoSecret fails the test when any of texts contains any of secrets; where
// names what was scanned ("log line", "CLI output").
func NoSecret(t testing.TB, where string, texts []string, secrets ...string) {
	t.Helper()
	for _, s := range texts {
		for _, secret := range secrets {
			if secret != "" && strings.Contains(s, secret) {
				t.Fatalf("a %s carries a secret (%q): %s", where, clip(secret), s)
			}
		}
	}
}

// NoSecretInLogs is NoSecret over every observed log line.
func NoSecretInLogs(t testing.TB, logs *observer.ObservedLogs, secrets ...string) {
	t.Helper()
	NoSecret(t, "log line", LogLines(logs), secrets...)
}

// NoSecretInFiles fails the test when a file under any of dirs holds a
// secret, and returns how many files it read.
func NoSecretInFiles(t testing.TB, dirs []string, secrets ...string) int {
	t.Helper()
	n := 0
	for _, dir := range dirs {
		_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return nil // a file removed while walking is not a leak
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			n++
			for _, secret := range secrets {
				if secret != "" && strings.Contains(string(b), secret) {
					t.Errorf("%s holds a secret (%q)", p, clip(secret))
				}
			}
			return nil
		})
	}
	return n
}

// clip names a secret in a failure without printing all of it.
func clip(s string) string {
	if len(s) > 8 {
		return s[:8] + "…"
	}
	return s
}
