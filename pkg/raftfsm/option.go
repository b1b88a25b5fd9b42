package raftfsm

import (
	"maps"

	"github.com/lancemaster/lancemaster/gen-go/journal"
	"github.com/lancemaster/lancemaster/pkg/options"
)

// Cluster-wide options (DESIGN.md §11) are journaled so every master reads
// the same values. The leader validates before proposing and journals the
// canonical spelling, so snapshots of equal settings are byte-identical.
// Apply checks only what cannot differ between releases (the key's and the
// value's shape, options.CheckStored) and stores the value verbatim:
// during a rolling upgrade a new leader may set a key an older replica does
// not know, and both must store the same bytes (issue: replicas diverged when
// Apply refused unknown keys). Every reader clamps (options.Resolve).

func init() {
	register(CommandSpec{Type: CmdSetOption, Name: "set_option", Forward: ForwardFromFollower, Wake: WakeDispatcher}, journal.NewTSetOptionCommand, applySetOption)
}

func applySetOption(t *tx, c *journal.TSetOptionCommand) (*journal.TApplyResponse, error) {
	if err := options.CheckStored(c.Key, c.Value); err != nil {
		return respFail(journal.TApplyCode_INVALID, "%s", err.Error()), nil
	}
	if resp := checkAuditActor(c.Audit); resp != nil {
		return resp, nil
	}
	v := c.Value
	old, ok := t.m.options[c.Key]
	if ok && old == v {
		return respOK(), nil // idempotent: nothing to change
	}
	if !ok {
		// Not the default's value: that is the release's, and every
		// replica must record the same summary.
		old = "default"
	}
	setOption(&t.m, c.Key, v)
	t.noteOptionChange(c.Audit, c.Key)
	t.audit(c.Audit, AuditOptionSet, c.Key, "value: "+old+" → "+v)
	return respOK(), nil
}

// setOption copies the option map (published views share the old one) and
// re-resolves the clamped values.
func setOption(m *meta, key, value string) {
	opts := maps.Clone(m.options)
	opts[key] = value
	m.options = opts
	m.resolved = options.Resolve(opts)
}
