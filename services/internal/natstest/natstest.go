// Package natstest runs a real NATS server with JetStream inside the test process: one per
// test, on a random port, with its store in the test's temporary directory, shut down by
// t.Cleanup. Tests talk to it over TCP like any client would.
package natstest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/testenv"
)

// Server is an embedded NATS server with JetStream.
type Server struct {
	*server.Server
	opts *server.Options
	t    testing.TB
	log  errorLog
}

// errorLog keeps the errors the server logs, for tests that count what it refused.
type errorLog struct {
	mu     sync.Mutex
	errors []string
}

func (l *errorLog) Errorf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errors = append(l.errors, fmt.Sprintf(format, v...))
}
func (l *errorLog) Noticef(string, ...any) {}
func (l *errorLog) Warnf(string, ...any)   {}
func (l *errorLog) Fatalf(string, ...any)  {}
func (l *errorLog) Debugf(string, ...any)  {}
func (l *errorLog) Tracef(string, ...any)  {}

// ErrorsLogged counts the errors the server has logged that contain text, such as
// `authentication error - User "planner"` for each refused attempt of that user.
func (s *Server) ErrorsLogged(text string) int {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	n := 0
	for _, e := range s.log.errors {
		if strings.Contains(e, text) {
			n++
		}
	}
	return n
}

// Option changes the server's options before it starts: users and their permissions, TLS,
// operator mode, as a production server's configuration would.
type Option func(*server.Options)

// Start starts a JetStream-enabled server for the test.
func Start(t testing.TB, options ...Option) *Server {
	t.Helper()
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}
	for _, o := range options {
		o(opts)
	}
	s := &Server{opts: opts, t: t}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// StartFromConfig starts a server from a nats-server configuration file, as `nats-server -c`
// would (variables such as $PASSWORD come from the environment), on a random loopback port
// with its store in the test's temporary directory, whatever the file says of those.
func StartFromConfig(t testing.TB, path string) *Server {
	t.Helper()
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("natstest: %s: %v", path, err)
	}
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", server.RANDOM_PORT, 0
	opts.StoreDir, opts.NoLog, opts.NoSigs = t.TempDir(), true, true
	s := &Server{opts: opts, t: t}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	srv, err := server.NewServer(s.opts)
	if err != nil {
		s.t.Fatalf("natstest: new server: %v", err)
	}
	srv.SetLogger(&s.log, false, false)
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

// RestartEmpty stops the server and starts it again on the same port with an empty store: a
// server that lost its JetStream data (a pod without a persistent volume, a disk replaced).
func (s *Server) RestartEmpty() {
	s.t.Helper()
	s.opts.StoreDir = s.t.TempDir()
	// Cleanups run last registered first: this one stops the server before the new store's
	// folder is removed, which failed while the server still wrote into it.
	s.t.Cleanup(s.stop)
	s.Restart()
}

// stop shuts down the server running now (after a Restart, not the one started first: a
// method value s.Shutdown taken at Start would stop only that one) and waits for it.
func (s *Server) stop() {
	s.Shutdown()
	s.WaitForShutdown()
}

// Reload changes the running server's options the way a configuration reload (SIGHUP) does:
// clients whose credentials no longer pass are disconnected.
func (s *Server) Reload(change Option) {
	s.t.Helper()
	next := s.opts.Clone()
	next.Port = s.Addr().(*net.TCPAddr).Port // the port it runs on, not "any"
	change(next)
	if err := s.ReloadOptions(next); err != nil {
		s.t.Fatalf("natstest: reload: %v", err)
	}
	s.opts = next
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
	if _, err := bus.EnsureStreams(context.Background(), js, subjects, bus.StreamOptions{}); err != nil {
		t.Fatalf("natstest: streams: %v", err)
	}
	return nc, js, subjects
}

// SetMaxMsgSize sets the largest message a stream takes, as `nats stream edit --max-msg-size`
// does: the tests of what a message refused for its size does.
func SetMaxMsgSize(t testing.TB, js jetstream.JetStream, stream string, size int32) {
	t.Helper()
	EditStream(t, js, stream, func(c *jetstream.StreamConfig) { c.MaxMsgSize = size })
}

// EditStream changes a stream's configuration, as `nats stream edit` does.
func EditStream(t testing.TB, js jetstream.JetStream, stream string, edit func(*jetstream.StreamConfig)) {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("natstest: stream %s: %v", stream, err)
	}
	cfg := st.CachedInfo().Config
	edit(&cfg)
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("natstest: edit stream %s: %v", stream, err)
	}
}

// LeafOf starts a server with JetStream in domain that connects to hub as a leaf node, as an
// edge site does to a central cluster: its clients reach the hub's streams through JetStream
// domain hubDomain, its own through domain. hub must listen for leaf nodes (WithLeafNodes).
func LeafOf(t testing.TB, hub *Server, domain string) *Server {
	t.Helper()
	remote, err := url.Parse(fmt.Sprintf("nats-leaf://127.0.0.1:%d", hub.opts.LeafNode.Port))
	if err != nil {
		t.Fatal(err)
	}
	leaf := Start(t, func(o *server.Options) {
		o.JetStreamDomain = domain
		o.LeafNode.Remotes = []*server.RemoteLeafOpts{{URLs: []*url.URL{remote}}}
	})
	testenv.Eventually(t, 10*time.Second, "the leaf node connected to its hub", func() bool { return leaf.NumLeafNodes() == 1 })
	return leaf
}

// WithLeafNodes makes the server a hub with JetStream in domain, listening for leaf nodes.
func WithLeafNodes(t testing.TB, domain string) Option {
	port := testenv.FreePort(t)
	return func(o *server.Options) {
		o.JetStreamDomain = domain
		o.LeafNode.Host, o.LeafNode.Port = "127.0.0.1", port
	}
}
