package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/config"
	"github.com/resched/resched/services/internal/natsconn"
)

// connectNATS connects as this service; see natsconn.Connect.
func connectNATS(cfg Config, logger *slog.Logger) (*nats.Conn, <-chan struct{}, error) {
	return natsconn.Connect(cfg.NATSURL, "resched-planner", logger)
}

// natsReady is the readiness check of the NATS connection.
func natsReady(nc *nats.Conn) func(context.Context) error { return natsconn.Ready(nc) }

// connectRedis builds the client; it connects on first use, so a Redis that is not up yet
// shows in readiness rather than failing the start.
func connectRedis(cfg Config) (*redis.Client, error) {
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("Redis URL %s: %w", config.RedactURLs(cfg.RedisURL), err)
	}
	opts.ClientName = "resched-planner"
	return redis.NewClient(opts), nil
}

// redisLogger routes go-redis's own messages (connection pool trouble) into the JSON log.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...))
}

// ensureStreams creates or updates the streams, retrying with a growing delay until it works or
// ctx ends: NATS may be down, or up without JetStream yet.
func ensureStreams(ctx context.Context, js jetstream.JetStream, s bus.Subjects, o bus.StreamOptions, logger *slog.Logger) error {
	const attemptTimeout, maxDelay = 5 * time.Second, 5 * time.Second
	delay := 100 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := bus.EnsureStreams(actx, js, s, o)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("ensure streams: %w", context.Cause(ctx))
		}
		logger.Warn("ensure streams; retrying", "error", err, "retry_in", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("ensure streams: %w", context.Cause(ctx))
		case <-t.C:
		}
		delay = min(2*delay, maxDelay)
	}
}
