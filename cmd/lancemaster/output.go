package main

import (
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
	var doc any
	err = json.Unmarshal(b, &doc)
	return doc, err
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
