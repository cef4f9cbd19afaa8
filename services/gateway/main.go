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
	"io"
	"log/slog"
	"os"

	"github.com/resched/resched/services/internal/startup"
	"github.com/resched/resched/services/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status. Logs go to stdout, usage and
// configuration errors to stderr.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return startup.Service[Config]{
		Name:  "gateway",
		Parse: func() (Config, error) { return parseConfig(args, getenv, stderr) },
		Level: func(c Config) slog.Level { return c.LogLevel },
		Serve: serve,
	}.Run(stdout, stderr)
}

// serve runs the gateway until ctx is done, then stops it. It returns nil after a clean stop.
func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	logger.Info("gateway started", "version", version.String(), "config", cfg)
	g, err := newGateway(ctx, cfg, logger)
	if err != nil {
		return err
	}
	err = g.run(ctx)
	logger.Info("gateway stopped")
	return err
}
