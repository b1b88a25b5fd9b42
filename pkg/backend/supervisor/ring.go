package supervisor

import (
	"bytes"
	"slices"
	"sync"

	"github.com/lancemaster/lancemaster/pkg/backend/frame"
)

// redacted replaces a storage option value found in a worker's output.
const redacted = "[REDACTED]"

// minSecretLen: storage option values shorter than this are not scrubbed
// (two- and three-letter values such as "us" would shred the text without
// protecting anything), and a fragment of a value cut at the ring's edge is
// removed only if it is at least this long.
const minSecretLen = 4

// ring keeps the last size bytes written to it.
type ring struct {
	mu    sync.Mutex
	buf   []byte
	size  int
	start int   // index of the oldest byte once full
	total int64 // bytes ever written
}

func newRing(size int) *ring { return &ring{size: size, buf: make([]byte, 0, min(size, 4096))} }

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	r.total += int64(n)
	if len(p) >= r.size {
		r.buf = append(r.buf[:0], p[len(p)-r.size:]...)
		r.start = 0
		return n, nil
	}
	if room := r.size - len(r.buf); room > 0 {
		k := min(room, len(p))
		r.buf = append(r.buf, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // full: overwrite the oldest bytes
		k := copy(r.buf[r.start:], p)
		p = p[k:]
		r.start = (r.start + k) % r.size
	}
	return n, nil
}

// tail returns a copy of the kept bytes, oldest first, and whether older
// bytes were dropped.
func (r *ring) tail() ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]byte, 0, len(r.buf))
	out = append(out, r.buf[r.start:]...)
	out = append(out, r.buf[:r.start]...)
	return out, r.total > int64(len(r.buf))
}

// secretValues are the request's storage option values worth scrubbing,
// longest first (so a value containing another is replaced whole).
func secretValues(req *frame.Request) [][]byte {
	if req == nil {
		return nil
	}
	var out [][]byte
	for _, v := range req.StorageOptions {
		if len(v) >= minSecretLen {
			out = append(out, []byte(v))
		}
	}
	slices.SortFunc(out, func(a, b []byte) int { return len(b) - len(a) })
	return out
}

// scrub removes every secret from b. With cut set (b is a tail whose older
// bytes were dropped) a secret's suffix at the very start is removed too,
// as is, always, a secret's prefix at the very end (a write cut short), and
// b entirely when it lies inside one long secret.
func scrub(b []byte, secrets [][]byte, cut bool) []byte {
	if len(secrets) == 0 {
		return b
	}
	for _, s := range secrets {
		if cut && len(b) < len(s) && bytes.Contains(s, b) {
			return []byte(redacted)
		}
	}
	var head, tail bool
	for _, s := range secrets {
		if cut {
			for k := len(s) - 1; k >= minSecretLen; k-- {
				if k <= len(b) && bytes.HasPrefix(b, s[len(s)-k:]) {
					b, head = b[k:], true
					break
				}
			}
		}
		for k := len(s) - 1; k >= minSecretLen; k-- {
			if k <= len(b) && bytes.HasSuffix(b, s[:k]) {
				b, tail = b[:len(b)-k], true
				break
			}
		}
	}
	for _, s := range secrets {
		b = bytes.ReplaceAll(b, s, []byte(redacted))
	}
	out := make([]byte, 0, len(b)+2*len(redacted))
	if head {
		out = append(out, redacted...)
	}
	out = append(out, b...)
	if tail {
		out = append(out, redacted...)
	}
	return out
}
