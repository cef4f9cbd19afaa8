package natstest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is a JetStream cluster of servers inside the test process, routed to each other on
// loopback ports, each with its own store: what a three-server production cluster is, minus
// the machines.
type Cluster struct {
	Servers []*Server
	t       testing.TB
}

// StartCluster starts n servers named n0…, forming the cluster "resched", and waits until
// JetStream has a meta leader.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	clusterPorts := make([]int, n)
	for i := range n {
		clusterPorts[i] = testenv.FreePort(t)
	}
	for i := range n {
		var routes []string
		for j, p := range clusterPorts {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
			}
		}
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: testenv.FreePort(t),
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "resched", Host: "127.0.0.1", Port: clusterPorts[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		}
		s := &Server{opts: opts, t: t}
		s.start()
		t.Cleanup(func() {
			if s.Server != nil {
				s.Shutdown()
			}
		})
		c.Servers = append(c.Servers, s)
	}
	c.WaitReady()
	return c
}

// URLs is every server's client URL, comma-separated, as NATS_URL takes them.
func (c *Cluster) URLs() string {
	var urls []string
	for _, s := range c.Servers {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", s.opts.Port))
	}
	return strings.Join(urls, ",")
}

// WaitReady waits until every running server is ready and JetStream has a meta leader.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, s := range c.Servers {
			if s.Running() && (!s.ReadyForConnections(time.Second) || !s.JetStreamIsCurrent()) {
				ok = false
			}
		}
		if ok && c.metaLeader() {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatal("natstest: the cluster has no JetStream meta leader after 30 s")
		}
		time.Sleep(50 * time.Millisecond) // polling the servers' state
	}
}

func (c *Cluster) metaLeader() bool {
	for _, s := range c.Servers {
		if s.Running() && s.JetStreamIsLeader() {
			return true
		}
	}
	return false
}

// Running reports whether the server runs.
func (s *Server) Running() bool { return s.Server != nil && s.Server.Running() }

// Kill shuts a server of the cluster down at once, as the loss of its machine would (its
// clients and routes are cut; its store stays for a restart).
func (s *Server) Kill() {
	s.Shutdown()
	s.WaitForShutdown()
}

// Revive starts a killed server of a cluster again, with its store.
func (s *Server) Revive() {
	s.t.Helper()
	s.start()
}

// StreamLeader is the server that leads a stream now, asked through js.
func (c *Cluster) StreamLeader(js jetstream.JetStream, stream string) *Server {
	c.t.Helper()
	leader := streamLeader(c.t, js, stream)
	for _, s := range c.Servers {
		if s.opts.ServerName == leader {
			return s
		}
	}
	c.t.Fatalf("natstest: stream %s is led by %q, not a server of the cluster", stream, leader)
	return nil
}

// streamLeader is the name of the server that leads a stream now, asked through js.
func streamLeader(t testing.TB, js jetstream.JetStream, stream string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("natstest: stream %s: %v", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("natstest: stream %s: %v", stream, err)
	}
	return info.Cluster.Leader
}
