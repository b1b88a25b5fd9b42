// Package config holds the node configuration (a YAML file plus flags) and the
// cluster-wide options of DESIGN.md §11: validated when set, clamped when read.
// It is a leaf: anyone may import it.
package config
