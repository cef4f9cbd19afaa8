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
)

// connectNATS connects without waiting for a server: the planner may start before NATS (a
// compose file, a Kubernetes rollout) and keeps reconnecting for as long as it runs. closed is
// closed once the connection is closed for good (after Drain or Close).
func connectNATS(cfg Config, logger *slog.Logger) (nc *nats.Conn, closed <-chan struct{}, err error) {
	done := make(chan struct{})
	nc, err = nats.Connect(cfg.NATSURL,
		nats.Name("resched-planner"),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ConnectHandler(func(c *nats.Conn) {
			logger.Info("nats connected", "server", redactURLs(c.ConnectedUrl()))
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			logger.Warn("nats disconnected", "error", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			logger.Info("nats reconnected", "server", redactURLs(c.ConnectedUrl()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			logger.Error("nats error", "subject", subject, "error", err)
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(done) }),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w", redactURLs(cfg.NATSURL), err)
	}
	if nc.IsConnected() {
		// A connection made inside Connect does not call the ConnectHandler.
		logger.Info("nats connected", "server", redactURLs(nc.ConnectedUrl()))
	}
	return nc, done, nil
}

// natsReady is the readiness check of the NATS connection.
func natsReady(nc *nats.Conn) func(context.Context) error {
	return func(context.Context) error {
		if s := nc.Status(); s != nats.CONNECTED {
			return fmt.Errorf("not connected (%s)", s)
		}
		return nil
	}
}

// connectRedis builds the client; it connects on first use, so a Redis that is not up yet
// shows in readiness rather than failing the start.
func connectRedis(cfg Config) (*redis.Client, error) {
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("Redis URL %s: %w", redactURLs(cfg.RedisURL), err)
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
