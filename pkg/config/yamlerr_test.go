package config

import (
	"strings"
	"testing"
)

// A node file's mistakes come back one per line, in the file's words: the
// unknown key with its likely meaning, the wrong value with what is wanted,
// and no Go type name.
func TestNodeFileErrorsSpeakTheFilesWords(t *testing.T) {
	_, err := ParseNode([]byte("node_id: m1\nraft_bnd: 127.0.0.1:1\npeers: 3\nlog_levle: info\n"))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		`line 2: unknown key "raft_bnd" (did you mean "raft_bind"?)`,
		`line 3: the number "3" where a list is wanted`,
		`line 4: unknown key "log_levle" (did you mean "log_level"?)`,
	}
	if len(lines) != len(want) {
		t.Fatalf("lines = %q", lines)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %q, want %q", i, lines[i], want[i])
		}
	}
	if strings.Contains(err.Error(), "config.") || strings.Contains(err.Error(), "[]") {
		t.Errorf("Go type names leak: %q", err)
	}
}

func TestNearestKeyIsOnlyACloseOne(t *testing.T) {
	keys := []string{"data_dir", "node_id", "peers"}
	if got := nearest("data_dri", keys); got != "data_dir" {
		t.Errorf("data_dri -> %q", got)
	}
	if got := nearest("completely_different", keys); got != "" {
		t.Errorf("far key suggested %q", got)
	}
}
