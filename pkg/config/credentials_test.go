package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/job"
)

// canary is a secret that must never appear in an error.
const (
	canaryKey   = "CANARY_KEY_b7f1"
	canaryValue = "CANARY-SECRET-9d2e4a"
)

func secretsDir(t *testing.T, files map[string]string) DirCredentials {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return DirCredentials{Dir: dir}
}

func TestDirCredentialsFormats(t *testing.T) {
	d := secretsDir(t, map[string]string{
		"s3-prod.json": `{"aws_access_key_id": "AKIA1", "aws_secret_access_key": "s=cr/t", "region": "eu-west-1"}`,
		"minio.env":    "# MinIO\n\naws_access_key_id = AK2\r\nendpoint=http://minio:9000\nallow_http=true\n",
		"empty":        "  \n",
	})
	got, err := d.Resolve("s3-prod.json")
	if err != nil || len(got) != 3 || got["aws_secret_access_key"] != "s=cr/t" {
		t.Fatalf("json: %v, %v", got, err)
	}
	got, err = d.Resolve("minio.env")
	if err != nil || len(got) != 3 || got["aws_access_key_id"] != "AK2" || got["endpoint"] != "http://minio:9000" {
		t.Fatalf("lines: %v, %v", got, err)
	}
	if got, err := d.Resolve("empty"); err != nil || len(got) != 0 {
		t.Fatalf("empty file: %v, %v", got, err)
	}
	if got, err := d.Resolve(""); err != nil || got != nil {
		t.Fatalf("empty ref: %v, %v", got, err)
	}
}

func TestDirCredentialsRereadsEveryCall(t *testing.T) {
	d := secretsDir(t, map[string]string{"rot": `{"k": "v1"}`})
	if got, _ := d.Resolve("rot"); got["k"] != "v1" {
		t.Fatalf("first read %v", got)
	}
	// Rotate the way operators (and Kubernetes) do: write aside, rename over.
	tmp := filepath.Join(d.Dir, ".rot.tmp")
	if err := os.WriteFile(tmp, []byte("k=v2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.Dir, "rot")); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Resolve("rot"); got["k"] != "v2" {
		t.Fatalf("after rotation %v", got)
	}
	// The caller owns the map.
	a, _ := d.Resolve("rot")
	a["k"] = "changed"
	if b, _ := d.Resolve("rot"); b["k"] != "v2" {
		t.Fatal("maps are shared between calls")
	}
}

func TestDirCredentialsRejectsBadRefs(t *testing.T) {
	d := secretsDir(t, map[string]string{"ok": "k=v"})
	if err := os.Mkdir(filepath.Join(d.Dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{".", "..", "../ok", "sub/ok", `a\b`, "/etc/passwd", "a\x00b", "a\nb", strings.Repeat("x", 256), "\xff"} {
		_, err := d.Resolve(ref)
		var ce *CredentialsError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "invalid reference") {
			t.Errorf("ref %q: err = %v", ref, err)
		}
	}
	if _, err := d.Resolve("missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := d.Resolve("sub"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	if _, err := (DirCredentials{}).Resolve("ok"); err == nil || !strings.Contains(err.Error(), "secrets_dir") {
		t.Errorf("no dir: %v", err)
	}
}

func TestDirCredentialsFollowsSymlinks(t *testing.T) {
	d := secretsDir(t, map[string]string{"real": "k=v"})
	if err := os.Symlink(filepath.Join(d.Dir, "real"), filepath.Join(d.Dir, "link")); err != nil {
		t.Skip(err)
	}
	if got, err := d.Resolve("link"); err != nil || got["k"] != "v" {
		t.Fatalf("symlink: %v, %v", got, err)
	}
}

func manyOptions(n int, format string) string {
	var b strings.Builder
	if format == "json" {
		b.WriteString("{")
	}
	for i := range n {
		if format == "json" {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q: %q", fmt.Sprintf("%s_%d", canaryKey, i), canaryValue)
		} else {
			fmt.Fprintf(&b, "%s_%d=%s\n", canaryKey, i, canaryValue)
		}
	}
	if format == "json" {
		b.WriteString("}")
	}
	return b.String()
}

// TestMalformedCredentialsNeverLeak feeds malformed files that all contain
// the canary key and value; no error may contain either.
func TestMalformedCredentialsNeverLeak(t *testing.T) {
	longVal := strings.Repeat("v", job.MaxStorageOptionValBytes+1)
	longKey := strings.Repeat("k", job.MaxStorageOptionKeyBytes+1)
	cases := map[string]struct{ content, want string }{
		"json syntax":         {`{"` + canaryKey + `": "` + canaryValue + `" "x": "y"}`, "syntax error at byte"},
		"json bad char":       {`{"` + canaryKey + `": ` + canaryValue + `}`, "syntax error at byte"},
		"json truncated":      {`{"` + canaryKey + `": "` + canaryValue, "not a valid JSON object"},
		"json number":         {`{"a": "b", "` + canaryKey + `": 12345}`, "option 2: value must be a JSON string"},
		"json nested":         {`{"` + canaryKey + `": {"` + canaryValue + `": "x"}}`, "option 1: value must be a JSON string"},
		"json array":          {`["` + canaryKey + `", "` + canaryValue + `"]`, "want a JSON object"},
		"json trailing":       {`{"` + canaryKey + `": "` + canaryValue + `"} {"` + canaryValue + `": "1"}`, "after the JSON object"},
		"json duplicate":      {`{"` + canaryKey + `": "a", "b": "c", "` + canaryKey + `": "` + canaryValue + `"}`, "option 3: duplicate key (same as option 1)"},
		"json empty key":      {`{"": "` + canaryValue + `"}`, "option 1: empty key"},
		"json long value":     {`{"` + canaryKey + `": "` + canaryValue + longVal + `"}`, "option 1: value is longer than 4096 bytes"},
		"json long key":       {`{"` + canaryKey + longKey + `": "` + canaryValue + `"}`, "option 1: key is longer than 256 bytes"},
		"json too many":       {manyOptions(65, "json"), "more than 64 options"},
		"lines no equals":     {"a=b\n" + canaryKey + canaryValue + "\n", "line 2 (option 2): expected KEY=VALUE"},
		"lines duplicate":     {canaryKey + "=x\n#c\n" + canaryKey + "=" + canaryValue + "\n", "line 3 (option 2): duplicate key"},
		"lines long value":    {canaryKey + "=" + canaryValue + longVal, "value is longer than 4096 bytes"},
		"lines empty key":     {"=" + canaryValue, "empty key"},
		"lines too many":      {manyOptions(65, "lines"), "more than 64 options"},
		"lines invalid utf-8": {canaryKey + "=" + canaryValue + "\xff", "not valid UTF-8"},
	}
	for name, c := range cases {
		d := secretsDir(t, map[string]string{"creds": c.content})
		_, err := d.Resolve("creds")
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, canaryKey) || strings.Contains(msg, canaryValue) || strings.Contains(msg, "CANARY") {
			t.Errorf("%s: error leaks the content: %s", name, msg)
		}
		if !strings.Contains(msg, c.want) || !strings.Contains(msg, `credentials "creds"`) {
			t.Errorf("%s: error %q, want it to name the file and contain %q", name, msg, c.want)
		}
	}
	// Exactly at the bounds is fine.
	d := secretsDir(t, map[string]string{"max": manyOptions(64, "json")})
	if got, err := d.Resolve("max"); err != nil || len(got) != 64 {
		t.Fatalf("64 options: %d, %v", len(got), err)
	}
}

func TestCheckStorageOptionsNeverLeaks(t *testing.T) {
	for _, opts := range []map[string]string{
		{canaryKey: canaryValue + strings.Repeat("x", job.MaxStorageOptionValBytes)},
		{canaryKey + strings.Repeat("x", job.MaxStorageOptionKeyBytes): canaryValue},
		{"": canaryValue},
		{canaryKey: canaryValue + "\xff"},
	} {
		err := CheckStorageOptions(opts)
		if err == nil || strings.Contains(err.Error(), "CANARY") {
			t.Errorf("CheckStorageOptions = %v", err)
		}
	}
	many := map[string]string{}
	for i := range 65 {
		many[fmt.Sprint(canaryKey, i)] = canaryValue
	}
	if err := CheckStorageOptions(many); err == nil || strings.Contains(err.Error(), "CANARY") {
		t.Errorf("65 options: %v", err)
	}
	if err := CheckStorageOptions(map[string]string{"k": "v"}); err != nil {
		t.Error(err)
	}
}

func TestStaticCredentials(t *testing.T) {
	s := StaticCredentials{"a": {"k": "v"}, "big": {"": canaryValue}}
	got, err := s.Resolve("a")
	if err != nil || got["k"] != "v" {
		t.Fatal(got, err)
	}
	got["k"] = "x"
	if s["a"]["k"] != "v" {
		t.Fatal("Resolve returned the stored map")
	}
	if _, err := s.Resolve("missing"); !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if _, err := s.Resolve("big"); err == nil || strings.Contains(err.Error(), "CANARY") {
		t.Fatal(err)
	}
}

func TestDirCredentialsConcurrent(t *testing.T) {
	d := secretsDir(t, map[string]string{"c": `{"k": "v"}`})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				if got, err := d.Resolve("c"); err != nil || got["k"] != "v" {
					t.Error(got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
