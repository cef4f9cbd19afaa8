package redisconn

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/redistest"
)

// A node that hangs answers no CLUSTER SLOTS: the cluster client's background read of the slot
// map (no deadline of its own) gives up on it at slotMapTimeout and asks the next node, rather
// than after the read time-out (5 s), which had kept a promoted replica unknown that long.
func TestSlotMapReadGivesUpOnAHungNode(t *testing.T) {
	s := redistest.Start(t)
	// The options a cluster client gives its node clients (ClusterOptions.clientOptions).
	node := newClusterNode(&redis.Options{Addr: s.Addr, ReadTimeout: 5 * time.Second, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = node.Close() })
	ctx := context.Background()
	if err := node.Ping(ctx).Err(); err != nil { // a pooled connection, as the client holds
		t.Fatal(err)
	}
	s.Pause()
	t.Cleanup(s.Resume)
	start := time.Now()
	err := node.ClusterSlots(ctx).Err()
	took := time.Since(start)
	if err == nil {
		t.Fatal("CLUSTER SLOTS answered by a paused server")
	}
	t.Logf("CLUSTER SLOTS gave up after %v: %v", took.Round(time.Millisecond), err)
	if took > 2*time.Second {
		t.Errorf("CLUSTER SLOTS to a hung node took %v (its deadline %v, the read time-out 5 s)", took, slotMapTimeout)
	}
}

func TestOnlySlotMapReadsGetTheDeadline(t *testing.T) {
	ctx := context.Background()
	for cmd, want := range map[redis.Cmder]bool{
		redis.NewClusterSlotsCmd(ctx, "cluster", "slots"):   true,
		redis.NewClusterShardsCmd(ctx, "CLUSTER", "SHARDS"): true,
		redis.NewStringCmd(ctx, "cluster", "info"):          false,
		redis.NewStringCmd(ctx, "get", "slots"):             false,
		redis.NewStringCmd(ctx, "cluster"):                  false,
	} {
		if got := isSlotMapRead(cmd); got != want {
			t.Errorf("%v: slot-map read %v, want %v", cmd.Args(), got, want)
		}
	}
}
