package redistest_test

import (
	"context"
	"testing"

	"github.com/resched/resched/services/internal/redistest"
)

func TestClusterAndSentinelStart(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	ctx := context.Background()
	rc := c.Client(t)
	if err := rc.Set(ctx, "{p01}:x", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	m := c.MasterOf("{p01}:x")
	m.Kill()
	c.WaitHealthy()
	if got := c.MasterOf("{p01}:x"); got == m {
		t.Fatal("no failover")
	}

	s := redistest.StartSentinel(t)
	before := s.CurrentMaster()
	if before != s.Master {
		t.Fatal("the sentinels name another master")
	}
	t.Log(s.URL())
}
