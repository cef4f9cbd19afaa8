package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/resched/resched/services/internal/setup"
	"github.com/resched/resched/services/planner/internal/store"
)

// redisLogger routes go-redis's own messages (connection pool trouble) into the JSON log.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

// retry runs do until it works or ctx ends, paced by package setup: NATS or Redis may be down
// at start, or NATS up without JetStream yet. An error that says the configuration is wrong
// (store.ErrLayout) stops it at once.
func retry(ctx context.Context, what string, logger *slog.Logger, do func(context.Context) error) error {
	err := setup.Retry(ctx, setup.Pacing{}, func(ctx context.Context) error {
		err := do(ctx)
		if errors.Is(err, store.ErrLayout) {
			return setup.Final(err)
		}
		return err
	}, func(err error, wait time.Duration) {
		logger.Warn(what+"; retrying", "error", err, "retry_in", wait)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
