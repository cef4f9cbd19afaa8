package redistest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
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

// A master split off from the other nodes still answers its clients and takes their writes
// until it notices it is alone (the node time-out); its replica takes over meanwhile, and once
// the split heals the old master follows the new one: what it took alone is lost. The chaos
// runs rely on this being what a split does.
func TestClusterSplit(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1, redistest.Splittable())
	ctx := context.Background()
	const key = "{p01}:x"
	rc := c.Client(t)
	if err := rc.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	m := c.MasterOf(key)
	alone := m.Client(t)
	// The replica must have the write before the split, or the replica that takes over lacks it
	// (replication is asynchronous: a make test run saw the key missing after the split).
	if n, err := alone.Do(ctx, "WAIT", 1, 10_000).Int(); err != nil || n < 1 {
		t.Fatalf("WAIT for the replica: %d, %v", n, err)
	}
	c.Split(m)
	if err := alone.Set(ctx, key, "alone", 0).Err(); err != nil {
		t.Fatalf("the master split off refused a write at once: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, "a replica takes over", func() bool { return c.MasterOf(key) != m })
	testenv.Eventually(t, 30*time.Second, "the master split off refuses writes", func() bool {
		err := alone.Set(ctx, key, "later", 0).Err()
		return err != nil && strings.Contains(err.Error(), "CLUSTERDOWN")
	})
	c.Heal()
	c.WaitHealthy()
	if got := c.MasterOf(key); got == m {
		t.Fatal("the old master took its slots back")
	}
	if v, err := rc.Get(ctx, key).Result(); err != nil || v != "before" {
		t.Fatalf("after the split: %q, %v; want the write made before it", v, err)
	}
}

// A Sentinel master split off from its replica and the sentinels still answers its clients and
// takes their writes (Sentinel does not fence it); the sentinels promote the replica, and once
// the split heals they make the old master its replica: what it took alone is lost.
func TestSentinelSplit(t *testing.T) {
	s := redistest.StartSentinel(t, redistest.Splittable())
	ctx := context.Background()
	old := s.Master.Client(t)
	if err := old.Set(ctx, "x", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the replica has the write", func() bool {
		v, _ := s.Replica.Client(t).Get(ctx, "x").Result()
		return v == "before"
	})
	s.Split(s.Master)
	testenv.Eventually(t, 30*time.Second, "the sentinels promote the replica", func() bool { return s.CurrentMaster() == s.Replica })
	if err := old.Set(ctx, "x", "alone", 0).Err(); err != nil {
		t.Fatalf("the master split off refused a write: %v", err)
	}
	s.Heal()
	testenv.Eventually(t, 30*time.Second, "the old master follows the new one, synced", func() bool {
		info, err := old.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up")
	})
	if v, err := old.Get(ctx, "x").Result(); err != nil || v != "before" {
		t.Fatalf("after the split: %q, %v; want the write made before it", v, err)
	}
}

// A slot moved to a master added to the cluster takes its keys along, and the cluster's clients
// find them there.
func TestClusterMoveSlotToAnAddedMaster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	ctx := context.Background()
	rc := c.Client(t)
	for _, k := range []string{"{p01}:a", "{p01}:b"} {
		if err := rc.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	m := c.AddMaster()
	c.MoveSlot(c.Slot("{p01}:a"), m, 0)
	if got := c.MasterOf("{p01}:a"); got != m {
		t.Fatalf("the slot is served by %s, want the added master %s", got.Addr, m.Addr)
	}
	for _, k := range []string{"{p01}:a", "{p01}:b"} {
		if v, err := rc.Get(ctx, k).Result(); err != nil || v != k {
			t.Errorf("%s after the move: %q, %v", k, v, err)
		}
	}
}
