package raftfsm

import (
	"maps"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/config"
)

// Cluster-wide options (DESIGN.md §11) are journaled so every master reads
// the same values. The leader validates before proposing; Apply validates
// again (a value could come from an older or buggy proposer) and stores the
// canonical spelling, so snapshots of equal settings are byte-identical.

func init() { register(CmdSetOption, journal.NewTSetOptionCommand, applySetOption) }

func applySetOption(t *tx, c *journal.TSetOptionCommand) (*journal.TApplyResponse, error) {
	v, err := config.ValidateOption(c.Key, c.Value)
	if err != nil {
		return respFail(journal.TApplyCode_INVALID, "%s", err.Error()), nil
	}
	if old, ok := t.m.options[c.Key]; ok && old == v {
		return respOK(), nil // idempotent: nothing to change
	}
	setOption(&t.m, c.Key, v)
	return respOK(), nil
}

// setOption copies the option map (published views share the old one) and
// re-resolves the clamped values.
func setOption(m *meta, key, value string) {
	opts := maps.Clone(m.options)
	opts[key] = value
	m.options = opts
	m.resolved = config.ResolveOptions(opts)
}
