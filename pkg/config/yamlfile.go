package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
)

// LoadYAML reads a configuration file of at most max bytes and decodes it
// strictly over target, which holds the defaults (DecodeYAML). what names
// the file in errors ("node config", "backend config"). The one loader of
// master and backend files.
func LoadYAML(what, path string, max int, target any) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	if len(data) > max {
		return fmt.Errorf("%s %s: larger than %d bytes", what, path, max)
	}
	if err := DecodeYAML(data, target); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	return nil
}

// DecodeYAML decodes one YAML document over target. Unknown keys (typos)
// and duplicate keys are errors, said one per line without Go type names
// (YAMLError); so is a second document. An empty document leaves target
// as it was.
func DecodeYAML(data []byte, target any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(target); err != nil && !errors.Is(err, io.EOF) {
		return YAMLError(err, target)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return errors.New("more than one YAML document")
	}
	return nil
}
