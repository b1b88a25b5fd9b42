package config_test

import (
	"testing"

	"github.com/lancemaster/lancemaster/pkg/config"
	"github.com/lancemaster/lancemaster/pkg/job"
)

// An external test package: config stays a leaf, and pinning against
// pkg/job can never form an import cycle.
func TestStorageOptionBoundsMatchDesign(t *testing.T) {
	if config.MaxStorageOptions != job.MaxStorageOptions ||
		config.MaxStorageOptionKeyBytes != job.MaxStorageOptionKeyBytes ||
		config.MaxStorageOptionValueBytes != job.MaxStorageOptionValBytes {
		t.Fatal("storage option bounds differ from pkg/job (DESIGN.md §10)")
	}
}
