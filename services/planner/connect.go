package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/resched/resched/services/planner/internal/store"
)

// redisLogger routes go-redis's own messages (connection pool trouble) into the JSON log.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

// retry runs do until it works or ctx ends, with a growing delay: NATS or Redis may be down at
// start, or NATS up without JetStream yet. An error that says the configuration is wrong
// (errPermanent) stops it at once.
func retry(ctx context.Context, what string, logger *slog.Logger, do func(context.Context) error) error {
	const attemptTimeout, maxDelay = 5 * time.Second, 5 * time.Second
	delay := 100 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := do(actx)
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, store.ErrLayout) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		}
		logger.Warn(what+"; retrying", "error", err, "retry_in", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		case <-t.C:
		}
		delay = min(2*delay, maxDelay)
	}
}
