package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/store"
)

// An outage of every planner is recorded when a planner starts after the last heartbeat of any
// planner (plus two periods); a planner that was running all along records none, whatever gap
// its own heartbeats had (Redis away, a pause).
func TestHeartbeatRecordsOutagesOfEveryPlanner(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	const period = time.Second
	prev := map[string]time.Time{}
	beat := func(id string, now, started time.Time) (int, []store.Outage) {
		t.Helper()
		b, err := s.Heartbeat(ctx, id, now, now.Add(3*period), started, prev[id], period, 10)
		if err != nil {
			t.Fatal(err)
		}
		live, outages := b.Live, b.Outages
		prev[id] = now
		for i := range outages {
			outages[i].Recorded = time.Time{} // compared below without it
		}
		return live, outages
	}
	if live, outages := beat("a", t0, t0.Add(-time.Minute)); live != 1 || len(outages) != 0 {
		t.Fatalf("first heartbeat ever: %d live, outages %v", live, outages)
	}
	if live, outages := beat("b", t0.Add(2*time.Second), t0.Add(time.Second)); live != 2 || len(outages) != 0 {
		t.Fatalf("a second planner while the first runs: %d live, outages %v", live, outages)
	}
	// Both die at t0+2s; c starts at t0+20s.
	live, outages := beat("c", t0.Add(21*time.Second), t0.Add(20*time.Second))
	want := fmt.Sprint([]store.Outage{{From: t0.Add(4 * time.Second), To: t0.Add(20 * time.Second)}})
	if live != 1 || fmt.Sprint(outages) != want {
		t.Fatalf("after every planner died: %d live, outages %v, want %s", live, outages, want)
	}
	// c's own heartbeats stop for a minute (Redis away): c ran throughout, so no outage.
	if _, outages := beat("c", t0.Add(90*time.Second), t0.Add(20*time.Second)); fmt.Sprint(outages) != want {
		t.Fatalf("a gap in a live planner's heartbeats was recorded as an outage: %v", outages)
	}
	if err := s.Leave(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if live, _ := beat("d", t0.Add(91*time.Second), t0.Add(90*time.Second)); live != 1 {
		t.Fatalf("after c left: %d live, want only d", live)
	}
}

// Redis away for a while (a master lost) looks like an outage to a planner that starts just
// then; a planner that lived through the gap removes it when it can beat again.
func TestAPlannerThatLivedThroughAGapWithdrawsItsOutage(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	const period = time.Second
	beat := func(id string, now, started, prev time.Time) []store.Outage {
		t.Helper()
		b, err := s.Heartbeat(ctx, id, now, now.Add(3*period), started, prev, period, 10)
		if err != nil {
			t.Fatal(err)
		}
		return b.Outages
	}
	beat("a", t0, t0.Add(-time.Minute), time.Time{})
	// Redis is away from t0 to t0+10s. b starts at t0+8s and beats first when it returns.
	got := beat("b", t0.Add(10*time.Second), t0.Add(8*time.Second), time.Time{})
	if len(got) != 1 || !got[0].Recorded.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("b's first heartbeat: outages %v, want one recorded at t0+10s", got)
	}
	// a beats again; its previous heartbeat was at t0: it ran through the gap.
	if got := beat("a", t0.Add(10500*time.Millisecond), t0.Add(-time.Minute), t0); len(got) != 0 {
		t.Fatalf("after a beat through the gap: outages %v, want none", got)
	}
	if got := beat("b", t0.Add(11*time.Second), t0.Add(8*time.Second), t0.Add(10*time.Second)); len(got) != 0 {
		t.Fatalf("b sees %v", got)
	}
}

// A heartbeat with an expiry already past (a planner cut off from NATS) leaves the planner out
// of the live count, but it still counts as running: a planner started meanwhile records no
// outage.
func TestAHeartbeatAlreadyExpiredIsNotCountedLive(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	const period = time.Second
	if b, err := s.Heartbeat(ctx, "a", t0, t0.Add(3*period), t0.Add(-time.Minute), time.Time{}, period, 10); err != nil || b.Live != 1 {
		t.Fatalf("a's first heartbeat: %d live, %v", b.Live, err)
	}
	for i := 1; i <= 10; i++ { // a beats on, standing down, for 10 s
		now := t0.Add(time.Duration(i) * period)
		b, err := s.Heartbeat(ctx, "a", now, now.Add(-3*period), t0.Add(-time.Minute), now.Add(-period), period, 10)
		if err != nil || b.Live != 0 {
			t.Fatalf("a standing down at %v: %d live, %v; want 0", now, b.Live, err)
		}
	}
	now := t0.Add(11 * period)
	b, err := s.Heartbeat(ctx, "b", now, now.Add(3*period), t0.Add(9*period), time.Time{}, period, 10)
	if err != nil || b.Live != 1 || len(b.Outages) != 0 {
		t.Fatalf("b started at t0+9s: %d live, outages %v, %v; want 1 and none", b.Live, b.Outages, err)
	}
}

// The heartbeat reads Redis's clock, the one every planner shares.
func TestHeartbeatReadsRedissClock(t *testing.T) {
	s := newStore(t)
	before := time.Now()
	b, err := s.Heartbeat(context.Background(), "a", t0, t0.Add(3*time.Second), t0.Add(-time.Minute), time.Time{}, time.Second, 10)
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	// The redis-server runs on this machine: its clock is this one.
	if b.Clock.Before(before.Truncate(time.Microsecond)) || b.Clock.After(after) {
		t.Errorf("Redis's clock %v, not between %v and %v", b.Clock, before, after)
	}
}

func TestLeasesAreExclusiveAndRenewable(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	got, err := s.Acquire(ctx, []int{1, 2}, "a", time.Hour)
	if err != nil || fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("a acquires 1, 2: %v %v", got, err)
	}
	if got, _ := s.Acquire(ctx, []int{2, 3}, "b", time.Hour); fmt.Sprint(got) != "[3]" {
		t.Fatalf("b acquires from 2, 3: %v, want [3]", got)
	}
	if free, _ := s.FreePartitions(ctx); len(free) != s.Partitions()-3 {
		t.Fatalf("free partitions: %v", free)
	}
	if renewed, lost, err := s.Renew(ctx, []int{1, 3}, "a", time.Hour); err != nil || fmt.Sprint(lost) != "[3]" || fmt.Sprint(renewed) != "[1]" {
		t.Fatalf("a renews 1 and 3: renewed %v, lost %v (%v), want [1] and [3]", renewed, lost, err)
	}
	if err := s.Release(ctx, 3, "a"); err != nil {
		t.Fatal(err)
	}
	if _, lost, _ := s.Renew(ctx, []int{3}, "b", time.Hour); len(lost) != 0 {
		t.Fatal("a released b's lease")
	}
}

// The partition count is recorded at the first start; a planner set to another count is
// refused with the count to use, since it would not find the data.
func TestCheckLayoutRefusesAnotherPartitionCount(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	if err := store.New(rdb, "x", store.WithPartitions(64)).CheckLayout(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.New(rdb, "x", store.WithPartitions(64)).CheckLayout(ctx); err != nil {
		t.Fatalf("the same count again: %v", err)
	}
	err := store.New(rdb, "x").CheckLayout(ctx)
	if !errors.Is(err, store.ErrLayout) || !strings.Contains(err.Error(), "64 partitions") {
		t.Fatalf("another count: %v", err)
	}
	// Data written before the count was recorded used the default.
	old := store.New(rdb, "y")
	if _, err := old.PutCollection(ctx, "c", []byte(`{}`), "Enabled", 0, false); err != nil {
		t.Fatal(err)
	}
	if err := store.New(rdb, "y", store.WithPartitions(256)).CheckLayout(ctx); !errors.Is(err, store.ErrLayout) {
		t.Fatalf("256 partitions over unrecorded data of 16: %v", err)
	}
}

// On a Redis Cluster, losing a master costs only the leases of the partitions it serves: the
// others are still renewed, read and taken. go-redis ends a pipeline whose node is lost by
// setting its context error on every command, those the healthy masters answered too, so one
// lost master had every lease of every planner run out, and all dispatching stopped for the
// failover.
func TestLeasesOutliveALostClusterMaster(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartCluster(t, 3, 0)
	s := store.New(c.Client(t), "")
	n := s.Partitions()
	all := make([]int, n)
	for p := range all {
		all[p] = p
	}
	if got, err := s.Acquire(ctx, all[:n/2], "a", time.Hour); err != nil || len(got) != n/2 {
		t.Fatalf("acquire: %v %v", got, err)
	}
	lost := c.MasterOf("resched:{p00}:due")
	var reachable, reachableFree []int
	for _, p := range all {
		if c.MasterOf(fmt.Sprintf("resched:{p%02d}:due", p)) != lost {
			reachable = append(reachable, p)
			if p >= n/2 {
				reachableFree = append(reachableFree, p)
			}
		}
	}
	// Once the survivors mark the lost master failed (the cluster-node-timeout, 1.5 s, which
	// the steps below can outlast on a loaded machine), Redis's default of full coverage has
	// every node refuse every command (CLUSTERDOWN) until a failover: the window this test is
	// about is the one before. Without full coverage the survivors go on serving their slots
	// after it too, so the test sees that window however long its steps take.
	if err := c.Client(t).ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.ConfigSet(ctx, "cluster-require-full-coverage", "no").Err()
	}); err != nil {
		t.Fatal(err)
	}
	lost.Kill()
	within := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, time.Second) } // a lease period
	wctx, cancel := within()
	renewed, _, err := s.Renew(wctx, all[:n/2], "a", time.Hour)
	cancel()
	if want := intersect(reachable, all[:n/2]); err == nil || fmt.Sprint(renewed) != fmt.Sprint(want) {
		t.Fatalf("renew with a master lost: renewed %v (%v), want %v and an error", renewed, err, want)
	}
	wctx, cancel = within()
	free, err := s.FreePartitions(wctx)
	cancel()
	if err == nil || fmt.Sprint(free) != fmt.Sprint(reachableFree) {
		t.Fatalf("free partitions with a master lost: %v (%v), want %v and an error", free, err, reachableFree)
	}
	wctx, cancel = within()
	got, err := s.Acquire(wctx, all[n/2:], "b", time.Hour)
	cancel()
	if err == nil || fmt.Sprint(got) != fmt.Sprint(reachableFree) {
		t.Fatalf("acquire with a master lost: %v (%v), want %v and an error", got, err, reachableFree)
	}
}

func intersect(a, b []int) []int {
	var out []int
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
