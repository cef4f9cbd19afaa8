package redistest

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/testenv"
)

// AddMaster starts a node, joins it to the cluster as a master serving no slot (redis-cli
// --cluster add-node, as an operator would), and waits until every node knows it.
func (c *Cluster) AddMaster() *Server {
	c.t.Helper()
	n := Start(c.t, WithPersistence(), clusterNode(strconv.Itoa(testenv.FreePort(c.t))))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "add-node", n.Addr, c.Nodes[0].Addr).CombinedOutput(); err != nil {
		c.t.Fatalf("redistest: redis-cli --cluster add-node: %v\n%s", err, out)
	}
	c.Nodes = append(c.Nodes, n)
	id := n.id()
	testenv.Eventually(c.t, 30*time.Second, "every node knows the new master, and it the cluster", func() bool {
		if info, err := n.do("CLUSTER", "INFO"); err != nil || !strings.Contains(info, "cluster_state:ok") {
			return false
		}
		for _, m := range c.Nodes {
			if nodes, err := m.do("CLUSTER", "NODES"); err != nil || !strings.Contains(nodes, id) {
				return false
			}
		}
		return true
	})
	return n
}

// MoveSlot moves a slot to another master the way redis-cli --cluster reshard does (the slot
// importing on the target and migrating on its master, its keys moved with MIGRATE, then the
// slot given to the target), one key at a time with pause after each: meanwhile the slot is
// half moved, and commands on its keys are redirected (ASK) or told to try again (TRYAGAIN).
func (c *Cluster) MoveSlot(slot int, to *Server, pause time.Duration) {
	c.t.Helper()
	from := c.masterOfSlot(strconv.Itoa(slot))
	if from == nil {
		c.t.Fatalf("redistest: no master serves slot %d", slot)
	}
	if from == to {
		return
	}
	must := func(n *Server, args ...any) string {
		c.t.Helper()
		v, err := n.do(args...)
		if err != nil {
			c.t.Fatalf("redistest: %v on %s: %v", args, n.Addr, err)
		}
		return v
	}
	must(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", from.id())
	must(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", to.id())
	host, port, _ := strings.Cut(to.Addr, ":")
	for {
		keys, err := from.keysInSlot(slot)
		if err != nil {
			c.t.Fatalf("redistest: keys of slot %d: %v", slot, err)
		}
		if len(keys) == 0 {
			break
		}
		must(from, "MIGRATE", host, port, keys[0], 0, 5000)
		time.Sleep(pause) // the slot stays half moved, as in a reshard of many keys
	}
	for _, n := range []*Server{to, from} {
		must(n, "CLUSTER", "SETSLOT", slot, "NODE", to.id())
	}
}

// id is the node's cluster id.
func (s *Server) id() string {
	s.t.Helper()
	id, err := s.do("CLUSTER", "MYID")
	if err != nil {
		s.t.Fatalf("redistest: CLUSTER MYID on %s: %v", s.Addr, err)
	}
	return id
}

// keysInSlot lists one key of slot that the node holds; none once it holds none.
func (s *Server) keysInSlot(slot int) ([]string, error) {
	c := redis.NewClient(s.options())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.ClusterGetKeysInSlot(ctx, slot, 1).Result()
}
