package dispatch

import (
	"os"
	"testing"

	"github.com/lancemaster/lancemaster/pkg/dispatch/mariadbtest"
)

// TestMain stops the MariaDB server the mysql refresher tests share, if
// one of them started it.
func TestMain(m *testing.M) {
	code := m.Run()
	mariadbtest.StopShared()
	os.Exit(code)
}
