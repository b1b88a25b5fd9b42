package config

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// checkLogging validates a log format and level.
func checkLogging(format, level string) error {
	if format != "json" && format != "console" {
		return fmt.Errorf("config: log_format %q: use json or console", clip(format))
	}
	switch level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("config: log_level %q: use debug, info, warn or error", clip(level))
	}
	return nil
}

// NewLogger builds the process logger: "json" (production: ISO-8601 time,
// one object per line) or "console" (human-readable, colour-free), at level
// debug|info|warn|error, to stderr. Sampling is off: a control plane's
// rare, important lines must not be dropped. The logger is safe for
// concurrent use; call Sync before exit.
func NewLogger(format, level string) (*zap.Logger, error) {
	if err := checkLogging(format, level); err != nil {
		return nil, err
	}
	lvl, _ := zapcore.ParseLevel(level)
	var cfg zap.Config
	if format == "json" {
		cfg = zap.NewProductionConfig()
	} else {
		cfg = zap.NewDevelopmentConfig()
		cfg.Development = false // no panics on DPanic, no stack on warn
		cfg.DisableStacktrace = true
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Sampling = nil
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.OutputPaths = []string{"stderr"}
	cfg.ErrorOutputPaths = []string{"stderr"}
	return cfg.Build()
}
