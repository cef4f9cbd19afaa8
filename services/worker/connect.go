package main

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/natsconn"
)

// connectNATS connects as this service; see natsconn.Connect.
func connectNATS(cfg Config, logger *slog.Logger) (*nats.Conn, <-chan struct{}, error) {
	return natsconn.Connect(cfg.NATSURL, "resched-worker", logger)
}

// natsReady is the readiness check of the NATS connection.
func natsReady(nc *nats.Conn) func(context.Context) error { return natsconn.Ready(nc) }
