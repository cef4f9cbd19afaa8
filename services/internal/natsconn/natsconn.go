// Package natsconn opens the NATS connection the services share: it never gives up
// reconnecting and logs each change of state.
package natsconn

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/config"
)

// Connect connects without waiting for a server: a service may start before NATS (a compose
// file, a Kubernetes rollout) and keeps reconnecting for as long as it runs. closed is closed
// once the connection is closed for good (after Drain or Close).
func Connect(url, name string, logger *slog.Logger) (nc *nats.Conn, closed <-chan struct{}, err error) {
	done := make(chan struct{})
	nc, err = nats.Connect(url,
		nats.Name(name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ConnectHandler(func(c *nats.Conn) {
			logger.Info("nats connected", "server", config.RedactURLs(c.ConnectedUrl()))
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			logger.Warn("nats disconnected", "error", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			logger.Info("nats reconnected", "server", config.RedactURLs(c.ConnectedUrl()))
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
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w", config.RedactURLs(url), err)
	}
	if nc.IsConnected() {
		// A connection made inside Connect does not call the ConnectHandler.
		logger.Info("nats connected", "server", config.RedactURLs(nc.ConnectedUrl()))
	}
	return nc, done, nil
}

// Ready is the readiness check of the connection.
func Ready(nc *nats.Conn) func(context.Context) error {
	return func(context.Context) error {
		if s := nc.Status(); s != nats.CONNECTED {
			return fmt.Errorf("not connected (%s)", s)
		}
		return nil
	}
}
