package options

import (
	"os"
	"strings"
	"testing"
)

// Every cluster-wide option is documented for operators, with its default.
func TestEveryOptionIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Specs() {
		row := "| `" + s.Key + "` | "
		i := strings.Index(string(doc), row)
		if i < 0 {
			t.Errorf("docs/configuration.md has no row for %s", s.Key)
			continue
		}
		line, _, _ := strings.Cut(string(doc[i:]), "\n")
		if !strings.Contains(line, "`"+s.Default+"`") {
			t.Errorf("docs/configuration.md: %s's row does not give its default %s", s.Key, s.Default)
		}
	}
}
