// Command worker is a resched worker: it pulls due occurrences from the JetStream due stream,
// delivers each job's action (HTTP, Storage Queue, Service Bus queue or topic) with its retry
// policy and error action, and publishes the outcome for the planner. Workers keep no state;
// run as many as the load needs.
//
// This is the skeleton: it reads its configuration (RESCHED_WORKER_* variables and NATS_URL,
// overridden by flags; see -h), logs it as JSON and runs until SIGINT or SIGTERM. It does not
// connect to NATS yet.
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
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status. Logs go to stdout, usage and
// configuration errors to stderr.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 2
	}
	logger := slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel}))

	// Registered before serve logs "worker started", so a signal sent after that line is
	// always seen as a shutdown request, never as the default (killing) action.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, logger); err != nil {
		logger.Error("worker failed", "error", err)
		return 1
	}
	return 0
}

// serve runs the worker until ctx is done, then stops it.
func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	logger.Info("worker started", "config", cfg)
	<-ctx.Done()
	logger.Info("worker stopping", "reason", context.Cause(ctx).Error())
	// Nothing to drain yet: the NATS consumer and the deliveries arrive with the worker issue.
	logger.Info("worker stopped")
	return nil
}
