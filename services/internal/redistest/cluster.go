package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/testenv"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of redis-server processes on loopback ports, each master with its
// replicas, made with redis-cli --cluster create as an operator would.
type Cluster struct {
	Nodes []*Server
	t     testing.TB
	racks racks // with Splittable
}

// SetOption changes how StartCluster and StartSentinel lay a set of nodes out.
type SetOption func(*setLayout)

type setLayout struct{ splittable bool }

// Splittable puts each node on a loopback address of its own (127.0.1.n), where it listens and
// from which it opens its connections to the other nodes (the cluster bus, replication), and
// behind proxies that the other nodes and the clients reach it through, which it announces.
// Split can then cut nodes off from each other, as a network split between racks does, while
// the clients still reach every node. A Sentinel set's sentinels get an address of their own,
// without a proxy: they stay on the side of the nodes they are not split from.
func Splittable() SetOption { return func(l *setLayout) { l.splittable = true } }

// NodeTimeout is the cluster-node-timeout of the test clusters: how long a master may be
// unreachable before its replica is promoted.
const NodeTimeout = 1500 * time.Millisecond

// StartCluster starts masters × (1 + replicas) nodes with append-only files and forms the
// cluster, waiting until every slot is served.
func StartCluster(t testing.TB, masters, replicas int, opts ...SetOption) *Cluster {
	t.Helper()
	var layout setLayout
	for _, o := range opts {
		o(&layout)
	}
	c := &Cluster{t: t, racks: racks{t: t}}
	var addrs []string
	for range masters * (1 + replicas) {
		// The bus port is chosen too: the default, port+10000, may fall in the ephemeral range.
		bus := strconv.Itoa(testenv.FreePort(t))
		nodeOpts := []Option{WithPersistence(), clusterNode(bus)}
		if layout.splittable {
			nodeOpts = append(nodeOpts, c.racks.fronted(bus))
		}
		n := Start(t, nodeOpts...)
		c.racks.add(n)
		c.Nodes = append(c.Nodes, n)
		addrs = append(addrs, n.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", fmt.Sprint(replicas), "--cluster-yes")
	// Bounded: redis-cli waits without end for nodes that cannot reach each other's bus.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.WaitHealthy()
	return c
}

// clusterNode is the setting of a node of the test clusters, its cluster bus on port bus.
func clusterNode(bus string) Option {
	return WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port", bus,
		"--cluster-node-timeout", fmt.Sprint(NodeTimeout.Milliseconds()), "--cluster-replica-validity-factor", "0")
}

// Split cuts the nodes named off from the others, until Heal: the links between the two sides
// freeze (what is sent waits, a new connection is not answered), as when a network drops the
// packets between two racks. Clients reach every node all along. The cluster must have been
// started Splittable.
func (c *Cluster) Split(off ...*Server) { c.t.Helper(); c.racks.split(off...) }

// Heal ends a Split: the frozen links forward again, what waited first.
func (c *Cluster) Heal() { c.racks.heal() }

// URL is the redis+cluster:// URL of every node.
func (c *Cluster) URL() string {
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Addr)
	}
	return "redis+cluster://" + strings.Join(addrs, ",") + "/"
}

// Client is a cluster client for the test.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Addr)
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rc.Close() })
	return rc
}

// CPU is the CPU time every running node has used so far, added up.
func (c *Cluster) CPU(t testing.TB) time.Duration {
	t.Helper()
	var total time.Duration
	for _, n := range c.Nodes {
		if n.Running() {
			total += n.CPU(t)
		}
	}
	return total
}

// WaitHealthy waits until every running node says the cluster is ok and every slot has a
// master, and every running replica has finished its sync with its master. The cluster says ok
// before a replica's first sync ends (on a busy machine, seconds later): a test that kills a
// master must not find its replica still empty.
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := true
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			info, err := n.do("CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_assigned:16384") {
				ok = false
			}
			if !n.synced() {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatal("redistest: the cluster is not ok after 60 s")
		}
		time.Sleep(100 * time.Millisecond) // polling child processes
	}
}

// MasterOf is the running node that serves key now, once the cluster agrees on one (after a
// master is lost, once its replica is promoted).
func (c *Cluster) MasterOf(key string) *Server {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := c.masterOf(key); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: no running master serves %q after 60 s", key)
		}
		time.Sleep(100 * time.Millisecond) // polling child processes
	}
}

func (c *Cluster) masterOf(key string) *Server {
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		if slot, err := n.do("CLUSTER", "KEYSLOT", key); err == nil {
			return c.masterOfSlot(slot)
		}
	}
	return nil
}

// masterOfSlot is the running master that a node serving the cluster names for slot; nil when
// none does.
func (c *Cluster) masterOfSlot(slot string) *Server {
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		// A node that says the cluster is down (a master split off from the others, once it
		// notices) still names itself; those that serve name the master that does.
		if info, err := n.do("CLUSTER", "INFO"); err != nil || !strings.Contains(info, "cluster_state:ok") {
			continue
		}
		nodes, err := n.do("CLUSTER", "NODES")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(nodes, "\n") {
			f := strings.Fields(line)
			if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
				continue
			}
			for _, r := range f[8:] {
				if !inRange(r, slot) {
					continue
				}
				addr := strings.Split(f[1], "@")[0]
				for _, m := range c.Nodes {
					if m.Addr == addr && m.Running() {
						return m
					}
				}
			}
		}
	}
	return nil
}

// Slot is the hash slot of key.
func (c *Cluster) Slot(key string) int {
	c.t.Helper()
	for _, n := range c.Nodes {
		if v, err := n.do("CLUSTER", "KEYSLOT", key); err == nil {
			slot, _ := strconv.Atoi(v)
			return slot
		}
	}
	c.t.Fatalf("redistest: no node answers CLUSTER KEYSLOT %s", key)
	return 0
}

// ReplicasOf lists the running nodes that replicate master m, as m reports them.
func (c *Cluster) ReplicasOf(m *Server) []*Server {
	c.t.Helper()
	info, err := m.do("INFO", "replication")
	if err != nil {
		c.t.Fatalf("redistest: replicas of %s: %v", m.Addr, err)
	}
	var out []*Server
	for _, line := range strings.Split(info, "\n") {
		// slave0:ip=127.0.0.1,port=6380,state=online,offset=...,lag=0
		if !strings.HasPrefix(line, "slave") {
			continue
		}
		var ip, port string
		for _, f := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "ip":
				ip = v
			case "port":
				port = v
			}
		}
		for _, n := range c.Nodes {
			if n.Addr == ip+":"+port && n.Running() {
				out = append(out, n)
			}
		}
	}
	return out
}

func inRange(r, slot string) bool {
	var lo, hi, s int
	if _, err := fmt.Sscan(slot, &s); err != nil {
		return false
	}
	if n, _ := fmt.Sscanf(r, "%d-%d", &lo, &hi); n == 2 {
		return s >= lo && s <= hi
	}
	if n, _ := fmt.Sscanf(r, "%d", &lo); n == 1 {
		return s == lo
	}
	return false
}

// synced says whether the node is a master or a replica whose sync with its master has ended.
func (s *Server) synced() bool {
	info, err := s.do("INFO", "replication")
	return err == nil && (!strings.Contains(info, "role:slave") || strings.Contains(info, "master_link_status:up"))
}

// do runs one command on the node and returns its reply as text.
func (s *Server) do(args ...any) (string, error) {
	o := s.options()
	o.Protocol = 2 // flat replies, read as text the same way whatever the command
	c := redis.NewClient(o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := c.Do(ctx, args...).Result()
	return fmt.Sprint(v), err
}
