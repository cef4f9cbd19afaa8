package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
)

// The distributed engines users run, each losing a node while jobs fire every second: a
// Redis Cluster and a Sentinel set lose their master (a replica takes over), a JetStream
// cluster loses the server leading the due stream; a planner is killed in each. Every
// occurrence must still be delivered once or recorded, none skipped, few seconds late.

// topologyGroups are the jobs of the topology runs: 40 jobs every second.
var topologyGroups = []group{{20, 1, ""}, {20, 1, "All"}}

const topologySpan = 30 * time.Second

// killPlannerAt kills planner-1 at a time and starts it again two seconds later.
func killPlannerAt(c *cluster, s *schedule, at time.Duration) {
	s.at(at, "kill -9 planner-1", func() { c.killPlanner(1) })
	s.at(at+2*time.Second, "start planner-1", func() { c.startPlanner(1) })
}

func TestRedisClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault run of 45 s")
	}
	rc := redistest.StartCluster(t, 3, 1)
	n := natstest.Start(t)
	var lost *redistest.Server
	runProfile(t, profile{name: "redis cluster", planners: 2, workers: 2, groups: topologyGroups, span: topologySpan,
		faults: func(c *cluster, s *schedule) {
			s.at(8*time.Second, "kill -9 the Redis master of partition 0", func() {
				lost = rc.MasterOf("resched:{p00}:due")
				c.timeline.add(time.Now(), redisFailover, lost.Addr)
				lost.Kill()
			})
			killPlannerAt(c, s, 15*time.Second)
			s.at(22*time.Second, "start the lost master again (a replica now)", func() { lost.Start() })
		}},
		backends{redisURL: rc.URL(), natsURL: n.ClientURL(), replicas: 1, connect: n.Connect})
}

func TestRedisSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault run of 45 s")
	}
	rs := redistest.StartSentinel(t)
	n := natstest.Start(t)
	var lost *redistest.Server
	runProfile(t, profile{name: "redis sentinel", planners: 2, workers: 2, groups: topologyGroups, span: topologySpan,
		faults: func(c *cluster, s *schedule) {
			s.at(8*time.Second, "kill -9 the Redis master", func() {
				lost = rs.CurrentMaster()
				c.timeline.add(time.Now(), redisFailover, lost.Addr)
				lost.Kill()
			})
			killPlannerAt(c, s, 15*time.Second)
			s.at(22*time.Second, "start the lost master again", func() { lost.Start() })
		}},
		backends{redisURL: rs.URL(), natsURL: n.ClientURL(), replicas: 1, connect: n.Connect})
}

func TestNATSClusterStreamLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault run of 45 s")
	}
	nc := natstest.StartCluster(t, 3)
	r := redistest.Start(t, redistest.WithPersistence())
	var lost *natstest.Server
	runProfile(t, profile{name: "nats cluster", planners: 2, workers: 2, groups: topologyGroups, span: topologySpan,
		faults: func(c *cluster, s *schedule) {
			s.at(8*time.Second, "kill the NATS server leading the due stream", func() {
				js, err := jetstream.New(c.nc)
				if err != nil {
					t.Fatal(err)
				}
				lost = nc.StreamLeader(js, "SCHEDULER_DUE")
				c.timeline.add(time.Now(), natsLoss, fmt.Sprint(lost))
				lost.Kill()
			})
			killPlannerAt(c, s, 15*time.Second)
			s.at(22*time.Second, "start the lost NATS server again", func() { lost.Revive() })
		}},
		backends{redisURL: r.URL(), natsURL: nc.URLs(), replicas: 3, connect: func(tb testing.TB) *nats.Conn { return connectAll(tb, nc.URLs()) }})
}

// connectAll connects the test to a cluster, reconnecting to any server without limit.
func connectAll(t testing.TB, urls string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
