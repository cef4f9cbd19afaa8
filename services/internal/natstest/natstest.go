// Package natstest runs a real NATS server with JetStream inside the test process: one per
// test, on a random port, with its store in the test's temporary directory, shut down by
// t.Cleanup. Tests talk to it over TCP like any client would.
package natstest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
)

// Server is an embedded NATS server with JetStream.
type Server struct {
	*server.Server
	opts *server.Options
	t    testing.TB
}

// Start starts a JetStream-enabled server for the test.
func Start(t testing.TB) *Server {
	t.Helper()
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}
	s := &Server{opts: opts, t: t}
	s.start()
	t.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	srv, err := server.NewServer(s.opts)
	if err != nil {
		s.t.Fatalf("natstest: new server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.t.Fatal("natstest: server not ready")
	}
	s.Server = srv
}

// Restart stops the server and starts it again on the same port with the same store, as an
// operator restart would; JetStream data survives.
func (s *Server) Restart() {
	s.t.Helper()
	s.opts.Port = s.Addr().(*net.TCPAddr).Port
	s.Shutdown()
	s.WaitForShutdown()
	s.start()
}

// StoreDir is where the server keeps its JetStream files, for tests that read them.
func (s *Server) StoreDir() string { return s.opts.StoreDir }

// Connect returns a client connection closed at the end of the test. It reconnects forever,
// so it rides through Restart.
func (s *Server) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream connects to the server and ensures the system's streams under the default subject
// prefix, as a planner would at start: the setup every test of a JetStream part begins with.
func (s *Server) JetStream(t testing.TB) (*nats.Conn, jetstream.JetStream, bus.Subjects) {
	t.Helper()
	nc := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	subjects := bus.NewSubjects("")
	if err := bus.EnsureStreams(context.Background(), js, subjects, bus.StreamOptions{}); err != nil {
		t.Fatalf("natstest: streams: %v", err)
	}
	return nc, js, subjects
}
