// Command worker is a resched worker: it pulls due occurrences from the JetStream due stream,
// delivers each job's action (HTTP, Storage Queue, Service Bus queue or topic) with its retry
// policy and error action, and publishes the outcome of every attempt for the planner.
// Workers keep no state and need only NATS and the targets; run as many as the load needs,
// they share one durable consumer.
//
// It reads its configuration from RESCHED_WORKER_* variables and NATS_URL, overridden by
// flags (see -h); logs JSON to stdout; serves /healthz, /readyz and /metrics on
// RESCHED_WORKER_HTTP_ADDR; and on SIGINT or SIGTERM stops pulling, finishes the deliveries
// in flight (handing back those still running after RESCHED_WORKER_SHUTDOWN_TIMEOUT), drains
// NATS and exits 0. A worker killed outright loses nothing: its occurrences are redelivered
// to another worker after RESCHED_WORKER_ACK_WAIT.
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
		Name:  "worker",
		Parse: func() (Config, error) { return parseConfig(args, getenv, stderr) },
		Level: func(c Config) slog.Level { return c.LogLevel },
		Serve: serve,
	}.Run(stdout, stderr)
}

// serve runs the worker until ctx is done, then stops it. It returns nil after a clean stop.
func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	logger.Info("worker started", "version", version.String(), "config", cfg)
	w, err := newWorker(cfg, logger)
	if err != nil {
		return err
	}
	err = w.run(ctx)
	logger.Info("worker stopped")
	return err
}
