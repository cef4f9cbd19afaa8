package redistest

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/resched/resched/services/internal/testenv"
)

// racks places the nodes of a Redis set so that a network split between them can be made while
// clients still reach every node: each node on a loopback address of its own (127.0.1.n; all
// of 127.0.0.0/8 is loopback on Linux), from which it opens its connections to the others (the
// cluster bus, replication, a sentinel's links), and the data nodes behind proxies that they
// announce, which freeze what comes from the other side.
type racks struct {
	t     testing.TB
	nodes []*Server
	ips   []string
	// fronts are the proxies in front of each node (none for a sentinel, which other nodes
	// never connect to).
	fronts [][]*testenv.Proxy
}

// ip is the loopback address of the i'th node placed.
func (r *racks) ip(i int) string { return fmt.Sprintf("127.0.1.%d", i+1) }

// own gives the next node its address alone, no proxy: a sentinel.
func (r *racks) own() Option {
	ip := r.ip(len(r.ips))
	listen := net.JoinHostPort(ip, strconv.Itoa(testenv.FreePort(r.t)))
	r.ips, r.fronts = append(r.ips, ip), append(r.fronts, nil)
	return func(s *Server) {
		behind(listen, listen)(s)
		WithArgs("--bind-source-addr", ip)(s)
	}
}

// fronted gives the next node its address and a proxy in front of its port, which it announces
// to replicas, sentinels and clients, and one in front of its cluster bus port bus, if any.
func (r *racks) fronted(bus string) Option {
	ip := r.ip(len(r.ips))
	listen := net.JoinHostPort(ip, strconv.Itoa(testenv.FreePort(r.t)))
	front := testenv.StartProxy(r.t, listen)
	fronts := []*testenv.Proxy{front}
	_, port, _ := net.SplitHostPort(front.Addr())
	args := []string{"--bind-source-addr", ip, "--replica-announce-ip", "127.0.0.1", "--replica-announce-port", port}
	if bus != "" {
		busFront := testenv.StartProxy(r.t, net.JoinHostPort(ip, bus))
		fronts = append(fronts, busFront)
		_, busPort, _ := net.SplitHostPort(busFront.Addr())
		args = append(args, "--cluster-announce-ip", "127.0.0.1", "--cluster-announce-port", port, "--cluster-announce-bus-port", busPort)
	}
	r.ips, r.fronts = append(r.ips, ip), append(r.fronts, fronts)
	return func(s *Server) {
		behind(listen, front.Addr())(s)
		WithArgs(args...)(s)
	}
}

// add records a node started with the option own or fronted gave.
func (r *racks) add(n *Server) { r.nodes = append(r.nodes, n) }

// split cuts the nodes named off from the others, until heal: the links between the two sides
// freeze (what is sent waits, a new connection is not answered), as when a network drops the
// packets between two racks. Clients reach every node all along.
func (r *racks) split(off ...*Server) {
	r.t.Helper()
	if r.fronts == nil {
		r.t.Fatal("redistest: a split needs a set started Splittable")
	}
	side := func(i int) bool { return slices.Contains(off, r.nodes[i]) }
	for i := range r.nodes {
		for j := range r.nodes {
			if side(i) == side(j) {
				continue
			}
			for _, f := range r.fronts[i] {
				f.FreezeFrom(r.ips[j])
			}
		}
	}
}

// heal ends a split: the frozen links forward again, what waited first.
func (r *racks) heal() {
	for _, fs := range r.fronts {
		for _, f := range fs {
			f.Thaw()
		}
	}
}
