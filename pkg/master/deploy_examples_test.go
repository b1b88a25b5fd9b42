package master

import (
	"testing"

	"github.com/lancemaster/lancemaster/pkg/backend"
	"github.com/lancemaster/lancemaster/pkg/config"
)

// The example configs in deploy/examples load and validate with the real
// loaders, so they cannot drift from the config schema.
func TestDeployExamplesLoad(t *testing.T) {
	for _, f := range []string{"master-1", "master-2", "master-3"} {
		n, err := config.LoadNode("../../deploy/examples/" + f + ".yaml")
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if n.TLS.CA == "" {
			t.Errorf("%s: the production example has no tls section", f)
		}
	}
	b, err := backend.LoadFileConfig("../../deploy/examples/backend.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
}
