package config

import (
	"log/slog"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestSlogHandlerRoutesIntoZap(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := slog.New(SlogHandler(zap.New(core))).With("component", "thrift").WithGroup("conn")
	l.Debug("dropped below the level")
	l.Error("error processing request", "peer", "127.0.0.1:1")
	l.Warn("w")
	all := logs.All()
	if len(all) != 2 {
		t.Fatalf("%d entries: %v", len(all), all)
	}
	e := all[0]
	if e.Level != zapcore.ErrorLevel || e.Message != "error processing request" ||
		e.ContextMap()["component"] != "thrift" || e.ContextMap()["conn.peer"] != "127.0.0.1:1" {
		t.Fatalf("entry %+v %v", e, e.ContextMap())
	}
	if all[1].Level != zapcore.WarnLevel {
		t.Fatalf("level %v", all[1].Level)
	}
}

func TestSlogHandlerSamplesFloods(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := slog.New(SlogHandler(zap.New(core)))
	for i := 0; i < 1000; i++ {
		l.Error("error processing request: Incorrect frame size")
	}
	if n := logs.Len(); n < 10 || n > 30 {
		t.Fatalf("%d of 1000 identical lines logged; want the first 10 and a sample", n)
	}
}
