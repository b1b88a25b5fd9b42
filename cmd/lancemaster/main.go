// Command lancemaster is the Raft-replicated control plane for Lance index
// jobs: the master daemon (serve), the backend agent, and the operator CLI
// that talks to the masters' admin API. See docs/cli.md.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
