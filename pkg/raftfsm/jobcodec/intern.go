package jobcodec

// Interner shares equal strings while a snapshot is restored: a million
// retained jobs repeat the same creators, tables, locators, properties and
// schema contracts, and one copy of each saves hundreds of bytes per job.
type Interner struct {
	m     map[string]string
	specs map[Spec]*Spec // ShareSpec
}

func NewInterner() *Interner {
	return &Interner{m: make(map[string]string, 1024), specs: make(map[Spec]*Spec, 1024)}
}

// maxInterned caps the table so a snapshot of unique strings cannot grow it
// without bound; past the cap strings are simply not shared.
const maxInterned = 1 << 20

// bytes returns the shared copy of b, making one when b is new. The lookup
// does not allocate, so a repeated value costs nothing. A nil Interner copies.
func (in *Interner) Bytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if in == nil {
		return string(b)
	}
	if v, ok := in.m[string(b)]; ok {
		return v
	}
	s := string(b)
	if len(in.m) < maxInterned {
		in.m[s] = s
	}
	return s
}

// maxInternedSpecs caps the specs shared while a snapshot is read (a spec
// is ~250 bytes with its map entry: 64 MiB at most, dropped after the
// restore); past it, specs are not shared.
const maxInternedSpecs = 1 << 18

// ShareSpec returns the shared copy of s (s itself when it is new), up to
// maxInternedSpecs of them. A nil interner shares nothing.
func (in *Interner) ShareSpec(s *Spec) *Spec {
	if in == nil {
		return s
	}
	if v, ok := in.specs[*s]; ok {
		return v
	}
	if len(in.specs) < maxInternedSpecs {
		in.specs[*s] = s
	}
	return s
}

// StrPool shares equal strings among the records Apply creates, as the
// Interner does for a restore: without it every admitted job would carry its
// own copy of its creator, db, table, locator, index names, properties and
// schema contract (a few hundred bytes) however many jobs repeat them. Only
// the FSM goroutine uses it, and sharing changes no record's value, so it
// cannot make replicas differ.
//
// It is bounded by generations: lookups go to the current map and then to
// the previous one (moving a hit forward); when the current map is full it
// becomes the previous one and the oldest is dropped. A string no job uses
// any more is forgotten after two generations.
type StrPool struct {
	cur, prev         map[string]string
	bytes             int // in cur
	specCur, specPrev map[Spec]*Spec
}

const (
	strPoolEntries = 1 << 14
	strPoolBytes   = 4 << 20
)

// NewStrPool returns an empty pool.
func NewStrPool() *StrPool { return &StrPool{cur: map[string]string{}, specCur: map[Spec]*Spec{}} }

// ShareSpec returns the shared copy of s (s itself when it is new), bounded
// by generations of strPoolEntries specs as the strings are. A nil pool
// shares nothing.
func (p *StrPool) ShareSpec(s *Spec) *Spec {
	if p == nil {
		return s
	}
	if v, ok := p.specCur[*s]; ok {
		return v
	}
	if v, ok := p.specPrev[*s]; ok {
		s = v
	}
	if len(p.specCur) >= strPoolEntries {
		p.specPrev, p.specCur = p.specCur, make(map[Spec]*Spec, len(p.specCur))
	}
	p.specCur[*s] = s
	return s
}

// Get returns the shared copy of s (s itself when it is new).
func (p *StrPool) Get(s string) string {
	if s == "" || p == nil {
		return s
	}
	if v, ok := p.cur[s]; ok {
		return v
	}
	if v, ok := p.prev[s]; ok {
		s = v
	}
	if len(p.cur) >= strPoolEntries || p.bytes+len(s) > strPoolBytes {
		p.prev, p.cur, p.bytes = p.cur, make(map[string]string, len(p.cur)), 0
	}
	p.cur[s] = s
	p.bytes += len(s)
	return s
}
