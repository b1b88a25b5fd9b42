package main

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/lancemaster/lancemaster/gen-go/adminapi"
)

// How `jobs show` prints a job view.

// hiddenJobFields are name fragments a job listing never prints, even if a
// future TJobView grew such a field: locators and secrets stay on the
// masters (DESIGN.md §1, §2). The view has none today.
var hiddenJobFields = []string{"locator", "secret", "credential", "storage_option", "dataset_uri"}

// jobFields lists every set field of a job view in field-id order, keyed by
// its JSON name. Times are shown in UTC and durations as durations, their
// "_ms" suffix dropped; the peak memory in binary units.
func jobFields(v *adminapi.TJobView) [][2]string {
	rv := reflect.ValueOf(v).Elem()
	rt := rv.Type()
	kvs := make([][2]string, 0, rt.NumField())
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "" || name == "-" || isHiddenJobField(name) || name == "stale_warning" {
			continue
		}
		fv := rv.Field(i)
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		}
		if name == "optimized_indexes" {
			// An OPTIMIZE's indexes: one line each (optimizedFields).
			kvs = append(kvs, optimizedFields(v.OptimizedIndexes)...)
			continue
		}
		if fv.Kind() == reflect.Slice {
			continue // other lists have no line of their own
		}
		switch {
		case fv.Kind() == reflect.Int64 && (strings.HasSuffix(name, "_time_ms") || name == "deadline_ms" || name == "resolve_after_ms"):
			kvs = append(kvs, [2]string{strings.TrimSuffix(name, "_ms"), timeMsExact(fv.Int())})
		case fv.Kind() == reflect.Int64 && (name == "wall_ms" || name == "build_elapsed_ms"):
			kvs = append(kvs, [2]string{strings.TrimSuffix(name, "_ms"), durationMs(fv.Int())})
		case name == "peak_memory_bytes":
			kvs = append(kvs, [2]string{"peak_memory", byteSize(fv.Int())})
		case name == "leftover_index_uuid":
			kvs = append(kvs, [2]string{name, "left behind index directory " + sanitize(fv.String())})
		default:
			kvs = append(kvs, [2]string{name, fmt.Sprint(fv.Interface())})
		}
	}
	return kvs
}

func isHiddenJobField(name string) bool {
	for _, h := range hiddenJobFields {
		if strings.Contains(name, h) {
			return true
		}
	}
	return false
}

// byteSize shows a byte count in binary units, with the exact count.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTP"[exp], n)
}
