package redisconn_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/redisconn"
	"github.com/resched/resched/services/internal/redistest"
)

// TestClusterCommandFollowsAPromotion kills the master of a key in a real three-master cluster
// and sends a command for that key at once, as a dispatch round does that began with the
// loss: the command must reach the promoted replica soon after the cluster agrees on it. With
// retries in each node's client too (and five dials a try), it went on knocking at the dead
// master and came back 10 to 13.5 s after the promotion; now it comes back within about a
// second.
func TestClusterCommandFollowsAPromotion(t *testing.T) {
	if testing.Short() {
		t.Skip("a Redis Cluster failover")
	}
	c := redistest.StartCluster(t, 3, 1)
	rdb, err := redisconn.Options{URL: c.URL()}.Client("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	const key = "resched:{p00}:due"
	master := c.MasterOf(key)
	ctx := context.Background()
	// Written on the master and held until its replica has it, so that the promotion keeps it.
	direct := master.Client(t)
	var wait *redis.Cmd
	if _, err := direct.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, "v", 0)
		wait = p.Do(ctx, "WAIT", 1, 5000)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := wait.Int64(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d replicas, %v", n, err)
	}
	if err := rdb.Get(ctx, key).Err(); err != nil { // the client knows the slot map and the master
		t.Fatal(err)
	}
	master.Kill()
	type answer struct {
		val string
		err error
		at  time.Time
	}
	got := make(chan answer, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		v, err := rdb.Get(cctx, key).Result()
		got <- answer{v, err, time.Now()}
	}()
	c.MasterOf(key) // returns once a running master serves the key: the replica, promoted
	promoted := time.Now()
	a := <-got
	if a.err != nil || a.val != "v" {
		t.Fatalf("GET after the failover: %q, %v", a.val, a.err)
	}
	// The bar leaves room for a loaded machine: the slot map is read again every second.
	late := a.at.Sub(promoted)
	t.Logf("the command came back %v after the promotion", late)
	if late > 4*time.Second {
		t.Errorf("the command came back %v after the promotion (bar 4 s)", late)
	}
}
