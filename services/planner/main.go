// Command planner is the resched planner: it takes job definitions from the NATS intake
// stream, stores them in Redis, computes each job's next fire time and publishes due
// occurrences to JetStream for the workers.
//
// This is the skeleton: it reads its configuration (RESCHED_PLANNER_* variables, NATS_URL,
// REDIS_URL, overridden by flags; see -h), logs it as JSON and runs until SIGINT or SIGTERM.
// It does not connect to NATS or Redis yet.
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
		fmt.Fprintln(stderr, "planner:", err)
		return 2
	}
	logger := slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel}))

	// Registered before serve logs "planner started", so a signal sent after that line is
	// always seen as a shutdown request, never as the default (killing) action.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg, logger); err != nil {
		logger.Error("planner failed", "error", err)
		return 1
	}
	return 0
}

// serve runs the planner until ctx is done, then stops it.
func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	logger.Info("planner started", "config", cfg)
	<-ctx.Done()
	logger.Info("planner stopping", "reason", context.Cause(ctx).Error())
	// Nothing to drain yet: the NATS and Redis clients arrive with the planner issue.
	logger.Info("planner stopped")
	return nil
}
