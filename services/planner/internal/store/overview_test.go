package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Overview reads the live planners (not the expired), the holder of each partition's lease
// and the outages on record, newest first.
func TestOverview(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := s.Heartbeat(ctx, "a", now, now.Add(3*time.Second), now.Add(-time.Hour), time.Time{}, time.Second, 100); err != nil {
		t.Fatal(err)
	}
	// b starts 10 s later, after a's heartbeat ran out: an outage is recorded.
	later := now.Add(10 * time.Second)
	if _, err := s.Heartbeat(ctx, "b", later, later.Add(3*time.Second), later, time.Time{}, time.Second, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, []int{0, 1}, "a", time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, []int{2}, "b", time.Hour); err != nil {
		t.Fatal(err)
	}
	o, err := s.Overview(ctx, later, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Planners) != 1 || o.Planners[0].ID != "b" || !o.Planners[0].Until.Equal(later.Add(3*time.Second)) {
		t.Errorf("live planners %+v, want b alone, until %v", o.Planners, later.Add(3*time.Second))
	}
	if len(o.Owners) != s.Partitions() || fmt.Sprint(o.Owners[:4]) != "[a a b ]" {
		t.Errorf("owners %q, want a, a, b, then none", o.Owners)
	}
	if len(o.Outages) != 1 || !o.Outages[0].From.Equal(now.Add(2*time.Second)) || !o.Outages[0].To.Equal(later) {
		t.Errorf("outages %+v, want one from %v to %v", o.Outages, now.Add(2*time.Second), later)
	}
}
