// Command sluice is the gateway's command-line client: make cli builds it
// into bin/sluice; go install github.com/sluice-gateway/sluice/infra/sluice@latest
// installs it. See pkg/cli.
package main

import (
	"context"
	"os"

	"github.com/sluice-gateway/sluice/pkg/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
