package cluster

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapHCLog adapts a zap.Logger to hclog.Logger so raft, its transport and its
// snapshot store log through the node's zap logger with typed fields.
//
// Levels: hclog Trace and Debug map to zap Debug, Info to Info, Warn to Warn,
// Error to Error. Trace is dropped unless SetLevel(hclog.Trace) was called:
// raft traces every heartbeat. The zap core's own level still applies.
//
// It is safe for concurrent use; derived loggers (With, Named) share the
// level with their parent.
type zapHCLog struct {
	root    *zap.Logger // without name or implied args
	z       *zap.Logger // root, named, with implied args and caller skip
	name    string
	implied []interface{}
	level   *atomic.Int32 // hclog.Level, shared with derived loggers
}

// newHCLog returns an hclog.Logger writing to z under the given name.
func newHCLog(z *zap.Logger, name string) hclog.Logger {
	lvl := new(atomic.Int32)
	lvl.Store(int32(hclog.Debug))
	return newZapHCLog(z, name, nil, lvl)
}

func newZapHCLog(root *zap.Logger, name string, implied []interface{}, lvl *atomic.Int32) *zapHCLog {
	z := root
	if name != "" {
		z = z.Named(name)
	}
	// Log -> emit -> zap: skip the two adapter frames so the caller is raft's.
	z = z.WithOptions(zap.AddCallerSkip(2)).With(hclogFields(implied)...)
	return &zapHCLog{root: root, z: z, name: name, implied: implied, level: lvl}
}

// hclogFields turns hclog's alternating key/value args into zap fields.
func hclogFields(args []interface{}) []zap.Field {
	if len(args) == 0 {
		return nil
	}
	fields := make([]zap.Field, 0, (len(args)+1)/2)
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			// hclog's own convention for a dangling value.
			fields = append(fields, zap.Any(hclog.MissingKey, args[i]))
			break
		}
		key, ok := args[i].(string)
		if !ok {
			key = fmt.Sprint(args[i])
		}
		switch v := args[i+1].(type) {
		case error:
			fields = append(fields, zap.NamedError(key, v))
		case hclog.Format:
			if len(v) > 0 {
				if f, ok := v[0].(string); ok {
					fields = append(fields, zap.String(key, fmt.Sprintf(f, v[1:]...)))
					continue
				}
			}
			fields = append(fields, zap.String(key, fmt.Sprint(v...)))
		default:
			fields = append(fields, zap.Any(key, v))
		}
	}
	return fields
}

func zapLevel(l hclog.Level) zapcore.Level {
	switch {
	case l <= hclog.Debug:
		return zapcore.DebugLevel
	case l == hclog.Info:
		return zapcore.InfoLevel
	case l == hclog.Warn:
		return zapcore.WarnLevel
	default:
		return zapcore.ErrorLevel
	}
}

func (h *zapHCLog) enabled(l hclog.Level) bool {
	if l == hclog.Off || l < hclog.Level(h.level.Load()) {
		return false
	}
	return h.z.Core().Enabled(zapLevel(l))
}

func (h *zapHCLog) emit(l hclog.Level, msg string, args []interface{}) {
	if !h.enabled(l) {
		return
	}
	if ce := h.z.Check(zapLevel(l), msg); ce != nil {
		ce.Write(hclogFields(args)...)
	}
}

func (h *zapHCLog) Log(l hclog.Level, msg string, args ...interface{}) { h.emit(l, msg, args) }
func (h *zapHCLog) Trace(msg string, args ...interface{})              { h.emit(hclog.Trace, msg, args) }
func (h *zapHCLog) Debug(msg string, args ...interface{})              { h.emit(hclog.Debug, msg, args) }
func (h *zapHCLog) Info(msg string, args ...interface{})               { h.emit(hclog.Info, msg, args) }
func (h *zapHCLog) Warn(msg string, args ...interface{})               { h.emit(hclog.Warn, msg, args) }
func (h *zapHCLog) Error(msg string, args ...interface{})              { h.emit(hclog.Error, msg, args) }

func (h *zapHCLog) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *zapHCLog) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *zapHCLog) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *zapHCLog) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *zapHCLog) IsError() bool { return h.enabled(hclog.Error) }

func (h *zapHCLog) ImpliedArgs() []interface{} {
	return append([]interface{}(nil), h.implied...)
}

func (h *zapHCLog) With(args ...interface{}) hclog.Logger {
	implied := append(append([]interface{}(nil), h.implied...), args...)
	return newZapHCLog(h.root, h.name, implied, h.level)
}

func (h *zapHCLog) Name() string { return h.name }

func (h *zapHCLog) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return newZapHCLog(h.root, name, h.implied, h.level)
}

func (h *zapHCLog) ResetNamed(name string) hclog.Logger {
	return newZapHCLog(h.root, name, h.implied, h.level)
}

func (h *zapHCLog) SetLevel(l hclog.Level) { h.level.Store(int32(l)) }

func (h *zapHCLog) GetLevel() hclog.Level { return hclog.Level(h.level.Load()) }

func (h *zapHCLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *zapHCLog) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	if opts == nil {
		opts = &hclog.StandardLoggerOptions{}
	}
	return &hclogWriter{h: h, opts: *opts}
}

// hclogWriter turns standard-library log lines into leveled records,
// recognising hclog's "[LEVEL]" prefixes when InferLevels is set.
type hclogWriter struct {
	h    *zapHCLog
	opts hclog.StandardLoggerOptions
}

var levelPrefixes = []struct {
	prefix string
	level  hclog.Level
}{
	{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info},
	{"[WARN]", hclog.Warn}, {"[ERROR]", hclog.Error}, {"[ERR]", hclog.Error},
}

func (w *hclogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		msg := strings.TrimSpace(string(line))
		if msg == "" {
			continue
		}
		level := hclog.Info
		if w.opts.InferLevels {
			for _, lp := range levelPrefixes {
				if strings.HasPrefix(msg, lp.prefix) {
					level = lp.level
					msg = strings.TrimSpace(strings.TrimPrefix(msg, lp.prefix))
					break
				}
			}
		}
		if w.opts.ForceLevel != hclog.NoLevel {
			level = w.opts.ForceLevel
		}
		w.h.emit(level, msg, nil)
	}
	return len(p), nil
}
