package chaos

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/apitest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/shared/job"
)

// A planner killed (SIGKILL) in the middle of enabling a collection of 20,000 jobs: started
// again, a planner finishes the enable from where it was, and every job fires. Before, the jobs
// the killed planner had not gone through stayed out of the schedule of a collection that read
// Enabled, and never fired until someone enabled it again.
func TestAnEnableCutShortByAKillIsFinished(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a planner and a worker, and waits for the change to go stale (about a minute)")
	}
	c := newCluster(t, 1, 1, single(t))
	c.ready()
	const n, every = 20000, 10
	if err := c.call("collections.put.big", map[string]any{"properties": map[string]any{}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.call("collections.disable.big", nil, nil); err != nil {
		t.Fatal(err)
	}
	def := fmt.Sprintf(`{"startTime": %q, "recurrence": {"frequency": "Second", "interval": %d},
	  "action": {"type": "Http", "request": {"method": "POST", "uri": "http://%s/big"}}}`,
		time.Now().UTC().Truncate(time.Minute).Format(time.RFC3339), every, c.target.addr)
	apitest.BulkPut(t, c.nc, "big", n, func(i int) string { return fmt.Sprintf("j%05d", i) }, func(int) string { return def })

	answered := make(chan error, 1)
	go func() {
		_, err := c.nc.Request("scheduler.api.collections.enable.big", nil, 2*time.Minute)
		answered <- err
	}()
	testenv.Eventually(t, 10*time.Second, "the enable under way (the collection reads Enabled)", func() bool {
		var coll job.Collection
		return c.call("collections.get.big", nil, &coll) == nil && coll.Properties.State == job.CollectionEnabled
	})
	c.killPlanner(0)
	killed := time.Now()
	select {
	case err := <-answered:
		if err == nil {
			t.Fatal("the enable was answered before the planner was killed: it no longer takes long enough for this test")
		}
	default:
	}
	fired := func() int {
		seen := map[string]bool{}
		for _, d := range c.target.all() {
			if strings.HasPrefix(d.job, "big/") {
				seen[d.job] = true
			}
		}
		return len(seen)
	}
	t.Logf("%d jobs of %d had fired when the planner was killed", fired(), n)
	c.startPlanner(0)
	testenv.Eventually(t, 90*time.Second, "every job of the collection to fire", func() bool { return fired() == n },
		func() string { return fmt.Sprintf("%d of %d fired", fired(), n) })
	t.Logf("every job fired %s after the kill", time.Since(killed).Round(time.Second))
	if log, err := os.ReadFile(c.planners[0].Log); err != nil || !strings.Contains(string(log), "finishing a collection's change that its planner left unfinished") {
		t.Errorf("the planner started again does not say it finished the change (%v)", err)
	}
}
