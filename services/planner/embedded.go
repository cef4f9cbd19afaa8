package main

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// startEmbeddedNATS runs a NATS server with JetStream inside the planner, so that one planner
// binary and a Redis make a complete single-machine scheduler (make run uses it); workers and
// clients connect to its address like to any NATS server.
func startEmbeddedNATS(addr, dir string, logger *slog.Logger) (*server.Server, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS address %q: %w", addr, err)
	}
	// nats-server logs a failed bind and then only never becomes ready; binding here first
	// turns "address already in use" into the error the operator reads.
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS cannot listen on %s: %w", addr, err)
	}
	_ = l.Close()
	srv, err := server.NewServer(&server.Options{
		ServerName: "resched-embedded", Host: host, Port: port,
		JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded NATS on %s did not start within 10 s", addr)
	}
	logger.Info("embedded nats started", "url", srv.ClientURL(), "store_dir", dir)
	return srv, nil
}
