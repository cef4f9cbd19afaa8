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
	// routes[i][j] carries the routes server i opens to server j, in a cluster whose routes
	// can be cut (StartPartitionableCluster); nil otherwise.
	routes [][]*testenv.Proxy
}

// StartCluster starts n servers named n0…, forming the cluster "resched", and waits until
// JetStream has a meta leader.
func StartCluster(t testing.TB, n int) *Cluster { return startCluster(t, n, false) }

// StartPartitionableCluster is StartCluster with every route through a proxy, so that a test
// can cut a server off from the others (Isolate) while its clients stay connected to it, as a
// network partition between the servers' machines does.
func StartPartitionableCluster(t testing.TB, n int) *Cluster { return startCluster(t, n, true) }

func startCluster(t testing.TB, n int, proxied bool) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	clusterPorts := make([]int, n)
	for i := range n {
		clusterPorts[i] = testenv.FreePort(t)
	}
	if proxied {
		c.routes = make([][]*testenv.Proxy, n)
		for i := range n {
			c.routes[i] = make([]*testenv.Proxy, n)
			for j, p := range clusterPorts {
				if j != i {
					c.routes[i][j] = testenv.StartProxy(t, fmt.Sprintf("127.0.0.1:%d", p))
				}
			}
		}
	}
	for i := range n {
		var routes []string
		for j, p := range clusterPorts {
			switch {
			case j == i:
			case proxied:
				routes = append(routes, "nats://"+c.routes[i][j].Addr())
			default:
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
			}
		}
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: testenv.FreePort(t),
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "resched", Host: "127.0.0.1", Port: clusterPorts[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		}
		if proxied {
			// Through the proxies only: told of each other's own addresses (gossip), the
			// servers would route to each other directly as well. Port 1 refuses.
			opts.Cluster.Advertise = "127.0.0.1:1"
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
func (c *Cluster) URLs() string { return c.URLsBut(-1) }

// URLsBut is URLs without server i's: a client that can never reach it.
func (c *Cluster) URLsBut(i int) string {
	var urls []string
	for j := range c.Servers {
		if j != i {
			urls = append(urls, c.URL(j))
		}
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

// Isolate cuts server i's routes to and from every other server until Rejoin, and returns
// once server i has dropped them; its clients stay connected to it. The server notices a
// route closed within milliseconds, but not within the cut: a request sent at once could
// still go out on a route about to close and be lost (TestGatewayOnAServerCutOffFromThePlanners
// had its first request time out so, once).
func (c *Cluster) Isolate(i int) {
	c.t.Helper()
	c.eachRoute(i, (*testenv.Proxy).Cut)
	testenv.Eventually(c.t, 10*time.Second, fmt.Sprintf("n%d to drop the routes cut", i),
		func() bool { return c.Servers[i].NumRoutes() == 0 })
}

// Rejoin lets server i route to the others again.
func (c *Cluster) Rejoin(i int) { c.eachRoute(i, (*testenv.Proxy).Mend) }

func (c *Cluster) eachRoute(i int, f func(*testenv.Proxy)) {
	if c.routes == nil {
		c.t.Fatal("natstest: the routes of a cluster not started by StartPartitionableCluster cannot be cut")
	}
	for j := range c.routes {
		if j != i {
			f(c.routes[i][j])
			f(c.routes[j][i])
		}
	}
}

// Index is the position in Servers of the server named name; it fails the test when none is.
func (c *Cluster) Index(name string) int {
	for i, s := range c.Servers {
		if s.opts.ServerName == name {
			return i
		}
	}
	c.t.Fatalf("natstest: no server %q in the cluster", name)
	return -1
}

// Hosting is the position in Servers of the server a client connection whose name holds part
// is connected to; it fails the test when none is.
func (c *Cluster) Hosting(part string) int {
	c.t.Helper()
	for i, s := range c.Servers {
		if !s.Running() {
			continue
		}
		conns, err := s.Connz(&server.ConnzOptions{Limit: 1024})
		if err != nil {
			c.t.Fatalf("natstest: connections of %s: %v", s.opts.ServerName, err)
		}
		for _, ci := range conns.Conns {
			if strings.Contains(ci.Name, part) {
				return i
			}
		}
	}
	c.t.Fatalf("natstest: no server has a connection named with %q", part)
	return -1
}

// URL is server i's own client URL.
func (c *Cluster) URL(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.Servers[i].opts.Port)
}

// Running reports whether the server runs.
func (s *Server) Running() bool { return s.Server != nil && s.Server.Running() }

// Kill shuts a server of the cluster down at once, as the loss of its machine would (its
// clients and routes are cut; its store stays for a restart).
func (s *Server) Kill() {
	s.Shutdown()
	s.WaitForShutdown()
}

// Revive starts a stopped server of a cluster again, with its store.
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
