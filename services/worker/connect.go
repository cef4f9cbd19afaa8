package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
)

// connectNATS connects without waiting for a server: the worker may start before NATS (a
// compose file, a Kubernetes rollout) and keeps reconnecting for as long as it runs. closed is
// closed once the connection is closed for good (after Drain or Close).
func connectNATS(cfg Config, logger *slog.Logger) (nc *nats.Conn, closed <-chan struct{}, err error) {
	done := make(chan struct{})
	nc, err = nats.Connect(cfg.NATSURL,
		nats.Name("resched-worker"),
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
