package job

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// Redacted replaces a credential found in a worker's log.
const Redacted = "[redacted]"

// minRedactBytes: keys and values shorter than this are not searched for
// (the backend's own bound: a two-letter value would shred every line).
const minRedactBytes = 4

// RedactLog removes from a worker's log every storage option key and value
// of at least 4 bytes (longest first, so one containing another goes
// whole), as the backend does before it keeps a line; the masters apply it
// again to what a backend sends, with the catalog's credentials. The
// result is valid UTF-8 and keeps at most max bytes (the newest, from a
// character start; max ≤ 0: no bound).
func RedactLog(text string, opts map[string]string, max int) string {
	var secrets []string
	for k, v := range opts {
		for _, s := range []string{k, v} {
			if len(s) >= minRedactBytes {
				secrets = append(secrets, s)
			}
		}
	}
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	text = strings.ToValidUTF8(text, "?")
	for _, s := range secrets {
		text = strings.ReplaceAll(text, s, Redacted)
	}
	if max > 0 && len(text) > max {
		i := len(text) - max
		for i < len(text) && !utf8.RuneStart(text[i]) {
			i++
		}
		text = text[i:]
	}
	return text
}
