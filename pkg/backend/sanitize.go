package backend

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// redacted replaces a secret found in a message.
const redacted = "[redacted]"

// minScrubBytes: keys and values shorter than this are not searched for (a
// one-letter value would shred every message, and is no secret).
const minScrubBytes = 4

// maxStderrLogBytes bounds the stderr tail written to the log.
const maxStderrLogBytes = 2048

// scrubber removes a request's secrets from text the worker produced
// (result messages, failure descriptions, stderr) before it is stored,
// answered or logged: every storage option key and value, and the
// invocation secret. The builder is meant never to print them; this is the
// agent not trusting that.
type scrubber struct{ secrets []string }

func newScrubber(opts map[string]string, extra ...string) scrubber {
	var s []string
	add := func(v string) {
		if len(v) >= minScrubBytes {
			s = append(s, v)
		}
	}
	for k, v := range opts {
		add(k)
		add(v)
	}
	for _, v := range extra {
		add(v)
	}
	// Longest first, so a secret containing another is removed whole.
	sort.Slice(s, func(i, j int) bool { return len(s[i]) > len(s[j]) })
	return scrubber{secrets: s}
}

// scrub removes every secret from text.
func (s scrubber) scrub(text string) string {
	for _, v := range s.secrets {
		if strings.Contains(text, v) {
			text = strings.ReplaceAll(text, v, redacted)
		}
	}
	return text
}

// message is text scrubbed, made one line of valid UTF-8 (control
// characters become spaces) and cut to the 1024-byte result message bound.
func (s scrubber) message(text string) string {
	text = strings.ToValidUTF8(text, "?")
	text = s.scrub(text)
	text = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, text)
	return job.TruncateMessage(strings.TrimSpace(text))
}

// stderrTail is the scrubbed last bytes of a worker's stderr, for the log.
// Secrets are removed before the cut, so a secret straddling the cut cannot
// leave a fragment.
func (s scrubber) stderrTail(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	text := s.scrub(strings.ToValidUTF8(string(b), "?"))
	if len(text) > maxStderrLogBytes {
		cut := len(text) - maxStderrLogBytes
		for cut < len(text) && !utf8.RuneStart(text[cut]) {
			cut++
		}
		text = "…" + text[cut:]
	}
	return text
}

// clipForLog bounds an untrusted identifier (an invocation id, a master id)
// before it is logged.
func clipForLog(s string) string {
	const max = 256
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
