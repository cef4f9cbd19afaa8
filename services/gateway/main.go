// Command gateway serves the Azure Resource Manager REST API of Microsoft.Scheduler
// (api-version 2016-03-01) in front of the planners, so that clients written for Azure
// Scheduler (the Azure SDKs, PowerShell, Terraform, curl with ARM paths) work unmodified
// (docs/azure-migration.md). It keeps no state and talks to the planners only through the NATS
// API: run as many as the load needs.
//
// It reads RESCHED_GATEWAY_* variables and the NATS_* ones, overridden by flags (see -h); logs
// JSON to stdout; serves the API on RESCHED_GATEWAY_ADDR (HTTPS with a certificate) and
// /healthz, /readyz and /metrics on RESCHED_GATEWAY_HTTP_ADDR; on SIGINT or SIGTERM stops
// accepting, finishes the requests in flight and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/resched/resched/services/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		return 2
	}
	logger := slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }()
	logger.Info("gateway started", "version", version.String(), "config", cfg)
	g, err := newGateway(ctx, cfg, logger)
	if err == nil {
		err = g.run(ctx)
	}
	if err != nil {
		logger.Error("gateway failed", "error", err)
		return 1
	}
	logger.Info("gateway stopped")
	return 0
}
