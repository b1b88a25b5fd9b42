package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// YAMLError turns a decoding error of a configuration file into one line
// per problem, in the file's words rather than Go's: an unknown key says
// which key, and what it was probably meant to be; a wrong value says what
// the key wants ("a list", "a duration like 10s"). target is the struct
// decoded into (its yaml tags are the known keys). Other errors are
// returned as they are.
func YAMLError(err error, target any) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	keys := yamlKeys(reflect.TypeOf(target))
	lines := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		lines = append(lines, friendlyYAMLLine(e, keys))
	}
	return errors.New(strings.Join(lines, "\n"))
}

var (
	reNotFound = regexp.MustCompile("^(line \\d+): field (\\S+) not found in type \\S+$")
	reUnmarsh  = regexp.MustCompile("^(line \\d+): cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")
)

func friendlyYAMLLine(e string, keys []string) string {
	if m := reNotFound.FindStringSubmatch(e); m != nil {
		s := fmt.Sprintf("%s: unknown key %q", m[1], m[2])
		if near := nearest(m[2], keys); near != "" {
			s += fmt.Sprintf(" (did you mean %q?)", near)
		}
		return s
	}
	if m := reUnmarsh.FindStringSubmatch(e); m != nil {
		return fmt.Sprintf("%s: %s %q where %s is wanted", m[1], yamlKindWord(m[2]), m[3], goTypeWord(m[4]))
	}
	// Keep the line, without Go's package-qualified type names.
	return regexp.MustCompile(`\b[a-z]+\.([A-Z]\w*)`).ReplaceAllString(e, "$1")
}

func yamlKindWord(tag string) string {
	switch tag {
	case "int", "float":
		return "the number"
	case "str":
		return "the string"
	case "bool":
		return "the boolean"
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	case "null":
		return "an empty value"
	}
	return "the value"
}

func goTypeWord(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case t == "time.Duration":
		return "a duration like 10s"
	case strings.HasSuffix(t, "ByteSize"):
		return "a size like 512MiB"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "a mapping"
}

// yamlKeys lists every yaml key of a struct type and of the structs it
// holds, sorted.
func yamlKeys(t reflect.Type) []string {
	seen := map[string]bool{}
	var walk func(reflect.Type, int)
	walk = func(t reflect.Type, depth int) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || depth > 4 {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				seen[name] = true
			}
			walk(f.Type, depth+1)
		}
	}
	if t != nil {
		walk(t, 0)
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// nearest is the known key closest to k, if it is close (an edit distance
// of at most 2, or a third of k's length).
func nearest(k string, keys []string) string {
	best, bestD := "", max(2, len(k)/3)+1
	for _, c := range keys {
		if d := editDistance(k, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
