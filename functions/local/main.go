// Command local runs every sluice route in one process, on the embedded
// storage by default (SLUICE_BACKEND=aws for the AWS adapters, which only a
// binary built with -tags aws links: see aws.go).
//
//	local            serve
//	local redrive    move the log events waiting in the delivery dead-letter
//	                 queue back to the delivery queue (locally, with sluice
//	                 stopped: it holds the data directory), then exit
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/handoff"
	"github.com/sluice-gateway/sluice/pkg/logging"
	"github.com/sluice-gateway/sluice/pkg/traces/otlp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slog.SetDefault(logging.New(os.Stderr, os.Getenv("SLUICE_LOG_FORMAT"), os.Getenv("SLUICE_LOG_LEVEL")))
	g, err := gateway.Open(ctx, os.Getenv, gateway.WithTraceExporter(otlp.Exporter), gateway.WithHandoff(handoff.Wrap), gateway.WithAWS(openAWS))
	if err != nil {
		return err
	}
	defer g.Close()
	if len(os.Args) > 1 && os.Args[1] == "redrive" {
		return g.Redrive(ctx, os.Stdout)
	}
	return g.Serve(ctx, os.Stderr)
}
