package cluster

import (
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestHCLogAdapterMapsLevelsAndFields(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	h := newHCLog(zap.New(core), "raft")

	h.Trace("heartbeat") // dropped: trace is off by default
	h.Debug("debug msg", "peer", "m2")
	h.Info("info msg", "term", uint64(3), "dangling")
	h.Named("transport").With("node", "m1").Warn("warn msg", "error", errors.New("boom"))
	h.Error("error msg", "fmt", hclog.Fmt("%d-%s", 7, "x"))
	h.SetLevel(hclog.Trace)
	h.Trace("now traced")

	want := []struct {
		level  zapcore.Level
		logger string
		msg    string
		fields map[string]interface{}
	}{
		{zapcore.DebugLevel, "raft", "debug msg", map[string]interface{}{"peer": "m2"}},
		{zapcore.InfoLevel, "raft", "info msg", map[string]interface{}{"term": uint64(3), hclog.MissingKey: "dangling"}},
		{zapcore.WarnLevel, "raft.transport", "warn msg", map[string]interface{}{"node": "m1", "error": "boom"}},
		{zapcore.ErrorLevel, "raft", "error msg", map[string]interface{}{"fmt": "7-x"}},
		{zapcore.DebugLevel, "raft", "now traced", map[string]interface{}{}},
	}
	got := logs.AllUntimed()
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		e := got[i]
		if e.Level != w.level || e.LoggerName != w.logger || e.Message != w.msg {
			t.Errorf("entry %d = %s %q %q, want %s %q %q", i, e.Level, e.LoggerName, e.Message, w.level, w.logger, w.msg)
		}
		ctx := e.ContextMap()
		for k, v := range w.fields {
			if ctx[k] != v {
				t.Errorf("entry %d field %s = %#v, want %#v", i, k, ctx[k], v)
			}
		}
	}
	if !h.IsDebug() || !h.IsError() || h.Name() != "raft" || h.GetLevel() != hclog.Trace {
		t.Errorf("level/name accessors wrong")
	}
	if h.ResetNamed("x").Name() != "x" || h.Named("a").Named("b").Name() != "raft.a.b" {
		t.Errorf("Named/ResetNamed wrong")
	}
}

func TestHCLogStandardWriterInfersLevels(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	h := newHCLog(zap.New(core), "raft")
	std := h.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	std.Print("[WARN] disk slow")
	std.Print("[ERR] gone")
	std.Print("plain")
	got := logs.AllUntimed()
	if len(got) != 3 {
		t.Fatalf("got %d entries, want 3", len(got))
	}
	for i, w := range []struct {
		level zapcore.Level
		msg   string
	}{{zapcore.WarnLevel, "disk slow"}, {zapcore.ErrorLevel, "gone"}, {zapcore.InfoLevel, "plain"}} {
		if got[i].Level != w.level || got[i].Message != w.msg {
			t.Errorf("entry %d = %s %q, want %s %q", i, got[i].Level, got[i].Message, w.level, w.msg)
		}
	}
}
