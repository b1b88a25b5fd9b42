package options

import (
	"strconv"
	"testing"
)

// The bounds of the index parameters and the HNSW deadline are options like
// the others: validated when set, defaulted and clamped when read.
func TestIndexBoundOptions(t *testing.T) {
	cases := []struct {
		key, def string
		read     func(Options) int64
	}{
		{OptMaxHNSWM, "64", func(o Options) int64 { return o.MaxHNSWM }},
		{OptMaxHNSWEfConstruction, "1000", func(o Options) int64 { return o.MaxHNSWEfConstruction }},
		{OptMaxSampleRate, "1024", func(o Options) int64 { return o.MaxSampleRate }},
		{OptMaxMaxIterations, "200", func(o Options) int64 { return o.MaxMaxIterations }},
		{OptMaxFTSTokenLength, "256", func(o Options) int64 { return o.MaxFTSTokenLength }},
		{OptHNSWExecuteDeadlineSecond, "14400", func(o Options) int64 { return o.HNSWExecuteDeadlineSecond }},
	}
	for _, c := range cases {
		spec, ok := Lookup(c.key)
		if !ok || spec.Kind != KindPositiveInt || spec.Default != c.def {
			t.Errorf("%s: spec %+v, known %v; want a positive integer defaulting to %s", c.key, spec, ok, c.def)
			continue
		}
		for _, bad := range []string{"0", "-1", "x", "1.5", "1099511627777"} {
			if _, err := Validate(c.key, bad); err == nil {
				t.Errorf("%s=%q accepted", c.key, bad)
			}
		}
		if v, err := Validate(c.key, " 0012 "); err != nil || v != "12" {
			t.Errorf("%s=12: %q %v", c.key, v, err)
		}
		if got := c.read(Resolve(nil)); got != mustInt(t, c.def) {
			t.Errorf("%s unset reads %d; want %s", c.key, got, c.def)
		}
		if got := c.read(Resolve(map[string]string{c.key: "7"})); got != 7 {
			t.Errorf("%s=7 reads %d", c.key, got)
		}
		// A stored value no leader would have journaled is clamped or defaulted.
		if got := c.read(Resolve(map[string]string{c.key: "-3"})); got != 1 {
			t.Errorf("%s=-3 reads %d; want 1", c.key, got)
		}
		if got := c.read(Resolve(map[string]string{c.key: "junk"})); got != mustInt(t, c.def) {
			t.Errorf("%s=junk reads %d; want the default", c.key, got)
		}
	}
	// HNSW builds are 10-40x slower than IVF_PQ: their deadline defaults to 4x.
	o := Resolve(nil)
	if o.HNSWExecuteDeadlineSecond != 4*o.ExecuteDeadlineSecond {
		t.Errorf("HNSW deadline %d, execute deadline %d", o.HNSWExecuteDeadlineSecond, o.ExecuteDeadlineSecond)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
