// Package startup is the start and end of every resched service's process, written once: the
// configuration read (its errors on stderr, exit status 2), the JSON logger on stdout, SIGINT
// and SIGTERM turned into a clean stop (a second signal kills at once), and the exit status.
package startup

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// Service is one service's part of the start.
type Service[C any] struct {
	Name  string
	Parse func() (C, error) // the configuration; flag.ErrHelp after -h
	Level func(C) slog.Level
	// Serve runs until ctx ends and then stops; it returns nil after a clean stop.
	Serve func(ctx context.Context, cfg C, logger *slog.Logger) error
	// Logger, when set, receives the logger first: for libraries with a process-wide one.
	Logger func(*slog.Logger)
}

// Run starts the service and returns the process's exit status: 0 after a clean stop (or -h),
// 1 when serving failed, 2 for a configuration that cannot be used.
func (s Service[C]) Run(stdout, stderr io.Writer) int {
	SetGCPercent(os.Getenv)
	cfg, err := s.Parse()
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, s.Name+":", err)
		return 2
	}
	logger := slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: s.Level(cfg)}))
	if s.Logger != nil {
		s.Logger(logger)
	}
	// Registered before Serve logs that the service started, so a signal sent after that line
	// is always a stop request, never the default (killing) action.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Once a stop has begun, a second signal kills the process the default way, for an
	// operator who will not wait for the shutdown timeout.
	go func() { <-ctx.Done(); stop() }()
	if err := s.Serve(ctx, cfg, logger); err != nil {
		logger.Error(s.Name+" failed", "error", err)
		return 1
	}
	return 0
}

// defaultGCPercent is the services' GOGC when the environment does not set one. Their live
// heaps are small (tens of MB) while every fire allocates, so at Go's default of 100 the
// collector ran several times a second under load: it took a tenth of a worker's CPU in a
// burst, and 400 brought that to 3 % (the planner had set 400 on its own since its first
// benchmarks). The heap then peaks at about five times the live data rather than twice.
// GOGC and GOMEMLIMIT set by the operator win.
const defaultGCPercent = 400

// SetGCPercent sets the services' GOGC unless the environment (getenv) sets one: every service
// at its start, and the benchmarks that run a service's code in their own process, so that they
// measure it as it runs.
func SetGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}
