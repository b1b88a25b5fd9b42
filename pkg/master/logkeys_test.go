package master_test

import (
	"testing"
	"time"

	"github.com/lancemaster/lancemaster/pkg/master"
	"github.com/lancemaster/lancemaster/pkg/master/mastertest"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// No log line of a master carries a key twice (issue: node_id repeated by
// the cluster and raft loggers under the master's own). The observer sees
// each entry's fields as they are encoded: the logger's own (With) and the
// call's.
func TestLogLinesNeverRepeatAKey(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	c := mastertest.NewWith(t, nil, func(i int) master.Options {
		if i == 0 {
			return master.Options{Logger: zap.New(core), Knobs: &master.Knobs{HeartbeatInterval: 50 * time.Millisecond}}
		}
		return master.Options{Knobs: &master.Knobs{HeartbeatInterval: 50 * time.Millisecond}}
	})
	c.Setup(c.Leader())
	eventually(t, 10*time.Second, "m1 to log", func() bool { return logs.Len() > 5 })
	for _, e := range logs.All() {
		seen := map[string]bool{}
		for _, f := range e.Context {
			if seen[f.Key] {
				t.Errorf("%s %q carries %q twice", e.LoggerName, e.Message, f.Key)
				break
			}
			seen[f.Key] = true
		}
	}
}
