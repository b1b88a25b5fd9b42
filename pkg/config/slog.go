package config

import (
	"context"
	"log/slog"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// SlogHandler routes log/slog records into a zap logger. The Thrift library
// reports protocol and TLS errors through slog's default logger; serve sets
// slog.SetDefault(slog.New(SlogHandler(log))) so they land in the same
// structured log as everything else instead of on bare stderr.
//
// The library logs one ERROR line per bad connection (a garbage frame, a
// plaintext client on a TLS port, a timeout), so anyone who can reach a port
// could fill the log at connection rate: the handler samples, keeping the
// first 10 lines per message each second and then every 100th.
func SlogHandler(log *zap.Logger) slog.Handler {
	sampled := log.WithOptions(zap.AddCallerSkip(3), zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 10, 100)
	}))
	return &slogHandler{log: sampled}
}

type slogHandler struct {
	log    *zap.Logger
	fields []zap.Field
	group  string
}

func (h *slogHandler) Enabled(_ context.Context, l slog.Level) bool {
	return h.log.Core().Enabled(zapLevel(l))
}

func (h *slogHandler) Handle(_ context.Context, r slog.Record) error {
	fields := append([]zap.Field(nil), h.fields...)
	r.Attrs(func(a slog.Attr) bool {
		fields = append(fields, h.field(a))
		return true
	})
	if ce := h.log.Check(zapLevel(r.Level), r.Message); ce != nil {
		ce.Write(fields...)
	}
	return nil
}

func (h *slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.fields = append([]zap.Field(nil), h.fields...)
	for _, a := range attrs {
		c.fields = append(c.fields, h.field(a))
	}
	return &c
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}

func (h *slogHandler) field(a slog.Attr) zap.Field {
	key := a.Key
	if h.group != "" {
		key = h.group + "." + key
	}
	return zap.Any(key, a.Value.Resolve().Any())
}

func zapLevel(l slog.Level) zapcore.Level {
	switch {
	case l >= slog.LevelError:
		return zapcore.ErrorLevel
	case l >= slog.LevelWarn:
		return zapcore.WarnLevel
	case l >= slog.LevelInfo:
		return zapcore.InfoLevel
	}
	return zapcore.DebugLevel
}
