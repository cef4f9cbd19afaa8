package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/store"
)

// A Redis that may evict keys is named, with its policy; one that never evicts (no maxmemory,
// or noeviction) is not.
func TestEvictingNamesAServerThatMayEvict(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s := store.New(rdb, "test")
	for _, tc := range []struct {
		maxmemory, policy string
		want              []string
	}{
		{"0", "allkeys-lru", nil}, // no limit: nothing is evicted
		{"100mb", "noeviction", nil},
		{"100mb", "allkeys-lru", []string{"redis: allkeys-lru"}},
		{"100mb", "volatile-ttl", []string{"redis: volatile-ttl"}},
	} {
		setEviction(t, rdb, tc.maxmemory, tc.policy)
		got, err := s.Evicting(ctx)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("maxmemory %s, %s: %q, %v; want %q", tc.maxmemory, tc.policy, got, err, tc.want)
		}
	}
}

// On a Cluster every master is asked, since each holds some of the partitions.
func TestEvictingAsksEveryClusterMaster(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 0)
	s := store.New(c.Client(t), "")
	if got, err := s.Evicting(ctx); err != nil || len(got) != 0 {
		t.Fatalf("before: %q, %v", got, err)
	}
	m := c.MasterOf("resched:{p03}:due")
	setEviction(t, m.Client(t), "100mb", "allkeys-lfu")
	got, err := s.Evicting(ctx)
	if err != nil || len(got) != 1 || !strings.HasPrefix(got[0], m.Addr+": allkeys-lfu") {
		t.Fatalf("%q, %v; want %s named", got, err, m.Addr)
	}
}

func setEviction(t *testing.T, rdb *redis.Client, maxmemory, policy string) {
	t.Helper()
	ctx := context.Background()
	if err := rdb.ConfigSet(ctx, "maxmemory", maxmemory).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
		t.Fatal(err)
	}
}
