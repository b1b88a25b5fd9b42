package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// dash stands for a value that is not set.
const dash = "-"

// formatWriter is a command's stdout with the global output options
// (-o yaml, --no-headers): printJSON and printTable read them from it.
type formatWriter struct {
	io.Writer
	yaml, name, noHeaders bool
	// now is the clock relative times (AGE) are measured against; nil
	// (a writer the CLI did not set up) prints exact times. verbose
	// (--verbose) prints exact times too.
	now     func() time.Time
	verbose bool
}

func formatOf(w io.Writer) formatWriter {
	if f, ok := w.(*formatWriter); ok {
		return *f
	}
	return formatWriter{Writer: w}
}

// printJSON writes v as indented JSON, or as YAML with -o yaml (the same
// document: the JSON is converted, so both have the same keys). The thrift
// structs of gen-go carry snake_case json tags, so they are marshalled as
// they are.
func printJSON(w io.Writer, v any) error {
	if formatOf(w).name {
		return printNames(w, v)
	}
	if formatOf(w).yaml {
		doc, err := jsonDoc(v)
		if err != nil {
			return err
		}
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(doc); err != nil {
			return err
		}
		return enc.Close()
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// nameKeys name a resource in -o name, in order of preference: a job, a
// catalog or option, a backend, a raft member.
var nameKeys = []struct{ key, kind string }{
	{"job_id", "job"}, {"backend_id", "backend"}, {"key", "option"}, {"name", "catalog"}, {"id", "peer"},
}

// printNames is -o name: one "kind/name" line per resource of the answer
// (a list, or an object with a list under "jobs" or "peers"), for scripts.
func printNames(w io.Writer, v any) error {
	doc, err := jsonDoc(v)
	if err != nil {
		return err
	}
	var items []any
	switch d := doc.(type) {
	case []any:
		items = d
	case map[string]any:
		items = []any{d}
		for _, k := range []string{"jobs", "peers", "members"} {
			if l, ok := d[k].([]any); ok {
				items = l
				break
			}
		}
	}
	for _, it := range items {
		obj, ok := it.(map[string]any)
		if !ok {
			continue
		}
		for _, nk := range nameKeys {
			if val, ok := obj[nk.key]; ok {
				if _, err := fmt.Fprintf(w, "%s/%s\n", nk.kind, sanitize(fmt.Sprint(jsonScalar(val)))); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// jsonDoc is v as -o json would print it, decoded back into plain maps
// and lists: the same keys for -o yaml and -o name.
func jsonDoc(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	return integers(doc), nil
}

// integers turns the JSON numbers of a decoded document into int64 where
// they are integers (ids, Unix times in ms), float64 otherwise: -o yaml
// prints 1700000000000, not 1.7e+12.
func integers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = integers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = integers(x[k])
		}
	}
	return v
}

// jsonScalar prints JSON numbers as integers when they are.
func jsonScalar(v any) any {
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return int64(f)
	}
	return v
}

// printTable writes an aligned table with a header row. Cells are cleaned
// of control characters: server text (messages, names) must not be able to
// break the layout or drive the terminal.
func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if !formatOf(w).noHeaders {
		writeRow(tw, header)
	}
	for _, r := range rows {
		writeRow(tw, r)
	}
	return tw.Flush()
}

func writeRow(w io.Writer, cells []string) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		io.WriteString(w, sanitize(c))
	}
	io.WriteString(w, "\n")
}

// printKeyValues writes "key: value" lines with the values aligned.
func printKeyValues(w io.Writer, kvs [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for _, kv := range kvs {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], sanitize(kv[1]))
	}
	return tw.Flush()
}

// sanitize replaces control characters (newlines, tabs, escape sequences)
// with spaces.
func sanitize(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

func str(p *string) string {
	if p == nil || *p == "" {
		return dash
	}
	return *p
}

// formatInt formats an id or counter of the admin API.
func formatInt[T ~int32 | ~int64](v T) string { return strconv.FormatInt(int64(v), 10) }

func i64(p *int64) string {
	if p == nil {
		return dash
	}
	return strconv.FormatInt(*p, 10)
}

func i32(p *int32) string {
	if p == nil {
		return dash
	}
	return strconv.FormatInt(int64(*p), 10)
}

func yesNo(p *bool) string {
	if p == nil {
		return dash
	}
	if *p {
		return "yes"
	}
	return "no"
}

// timeMs formats a Unix time in milliseconds, in UTC, to the second.
func timeMs(p *int64) string {
	if p == nil || *p == 0 {
		return dash
	}
	return time.UnixMilli(*p).UTC().Format(time.RFC3339)
}

// timeMsExact formats a Unix time in milliseconds, in UTC, to the millisecond.
func timeMsExact(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// when is a time in a table cell: its age, as kubectl prints one (3m,
// 2h5m, 4d), or with --verbose the exact time to the millisecond.
func when(w io.Writer, p *int64) string {
	if p == nil || *p == 0 {
		return dash
	}
	f := formatOf(w)
	switch {
	case f.verbose:
		return timeMsExact(*p)
	case f.now == nil:
		return timeMs(p)
	}
	return humanAge(f.now().Sub(time.UnixMilli(*p)))
}

// whenAgo is when for a "key: value" line: "3m ago".
func whenAgo(w io.Writer, p *int64) string {
	s := when(w, p)
	if f := formatOf(w); s == dash || f.verbose || f.now == nil {
		return s
	}
	return s + " ago"
}

// humanAge is k8s.io/apimachinery's HumanDuration: two units while the
// first is small, one after; a time ahead of the clock (another machine's
// clock) is 0s.
func humanAge(d time.Duration) string {
	if d < 0 {
		return "0s"
	}
	s := int64(d.Seconds())
	m, h := s/60, int64(d.Hours())
	days := h / 24
	switch {
	case s < 60*2:
		return units(s, "s", 0, "")
	case m < 10:
		return units(m, "m", s%60, "s")
	case m < 60*3:
		return units(m, "m", 0, "")
	case h < 8:
		return units(h, "h", m%60, "m")
	case h < 48:
		return units(h, "h", 0, "")
	case h < 24*8:
		return units(days, "d", h%24, "h")
	case h < 24*365*2:
		return units(days, "d", 0, "")
	case h < 24*365*8:
		return units(days/365, "y", days%365, "d")
	}
	return units(days/365, "y", 0, "")
}

// units prints a count of one unit and, when not zero, of the next.
func units(a int64, ua string, b int64, ub string) string {
	if b == 0 {
		return strconv.FormatInt(a, 10) + ua
	}
	return strconv.FormatInt(a, 10) + ua + strconv.FormatInt(b, 10) + ub
}
