package chaos

import (
	"bytes"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
)

// The partition count changed while jobs fire, as docs/scaling.md says to: both planners
// stopped (SIGTERM), `planner -repartition` moving the data on a Redis Cluster from the
// default 16 partitions to 64, the planners started again at 64. What fell due while no
// planner ran follows the catch-up policy; nothing else is lost, skipped or delivered twice,
// and history and counts agree with the target. In `make chaos` only.
func TestRepartitionWhileJobsFire(t *testing.T) {
	fullRunOnly(t)
	rc := redistest.StartCluster(t, 3, 1)
	n := natstest.Start(t)
	p := profile{name: "repartitioned", planners: 2, workers: 2, groups: topologyGroups, span: topologySpan,
		faults: func(c *cluster, s *schedule) {
			s.at(8*time.Second, "stop the planners, move the data to 64 partitions, start them at 64", func() {
				for i := range c.planners {
					c.stopPlanner(i)
				}
				out, err := c.planners[0].RunOnce("-repartition", "-partitions", "64")
				if err != nil {
					t.Errorf("planner -repartition: %v\n%s", err, out)
				}
				for line := range bytes.Lines(out) {
					if bytes.Contains(line, []byte(`"msg":"repartitioned"`)) {
						t.Logf("%s %s", time.Now().Format("15:04:05.000"), bytes.TrimSpace(line))
					}
				}
				for i := range c.planners {
					c.planners[i].AddEnv("RESCHED_PLANNER_PARTITIONS=64")
					c.startPlanner(i)
				}
			})
		}}
	runProfile(t, p, backends{redisURL: rc.URL(), natsURL: n.ClientURL(), replicas: 1, connect: n.Connect})
}
