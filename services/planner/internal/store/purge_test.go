package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/planner/internal/store"
)

// A job's delete, through the API or the intake, records the purge of its incarnation's
// messages from the due stream until its caller ends it; a purge is stale once its time is
// older than the cutoff asked, and taken up once. A job put again under the name is another,
// with its own incarnation, and leaves the record as it was. On one Redis, and on a Redis
// Cluster of 3 masters (the purges are read from every partition).
func TestDeletedJobsPurges(t *testing.T) { onServerAndCluster(t, testDeletedJobsPurges) }

func testDeletedJobsPurges(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	s := store.New(rdb, "test")
	stale := func(cutoff time.Time) []store.Purge {
		t.Helper()
		ps, err := s.Purges(ctx, cutoff, 10)
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	show := func(ps []store.Purge) string {
		out := ""
		for _, p := range ps {
			out += fmt.Sprintf("%s/%s@%d %s ", p.Collection, p.Job, p.Incarnation, p.Since.Format(time.TimeOnly))
		}
		return out
	}
	incs := map[string]int64{}
	for _, c := range []string{"a", "b"} {
		putCollection(t, s, c, 0)
		putJob(t, s, c, "j", t0)
		got, err := s.GetJob(ctx, c, "j")
		if err != nil || got.Incarnation == 0 {
			t.Fatal(got, err)
		}
		incs[c] = got.Incarnation
	}
	p, ok, err := s.DeleteJob(ctx, "a", "j", t0)
	if err != nil || !ok || p.Incarnation != incs["a"] {
		t.Fatalf("a/j deleted: %+v %v %v, want its incarnation %d", p, ok, err, incs["a"])
	}
	if _, ok, err := s.DeleteJob(ctx, "a", "none", t0); ok || err != nil {
		t.Fatalf("a job that does not exist deleted: %v %v", ok, err)
	}
	// The intake's delete of b/j, a second later.
	a := s.Apply(ctx, []store.Write{{Delete: &store.DeleteJob{Collection: "b", Name: "j", Stamp: store.Stamp{Epoch: 1, Seq: 7},
		At: t0.Add(time.Second)}}})[0]
	if a.Err != nil || !a.Created || a.Purge.Incarnation != incs["b"] {
		t.Fatalf("b/j deleted by the intake: %+v, want its incarnation %d", a, incs["b"])
	}
	// a/j put again: another job, the record of the deleted one's purge kept.
	putJob(t, s, "a", "j", t0)
	if again, _ := s.GetJob(ctx, "a", "j"); again == nil || again.Incarnation == incs["a"] {
		t.Fatalf("a/j put again: %+v, want another incarnation than %d", again, incs["a"])
	}
	if got := show(stale(t0)); got != "" {
		t.Errorf("stale at the first delete: %q", got)
	}
	want := fmt.Sprintf("a/j@%d 12:00:00 ", incs["a"])
	if got := show(stale(t0.Add(time.Second))); got != want {
		t.Errorf("stale a second after: %q, want %q", got, want)
	}
	ps := stale(t0.Add(time.Hour))
	if len(ps) != 2 {
		t.Fatalf("purges %q, want a/j's and b/j's", show(ps))
	}
	later := t0.Add(time.Minute)
	for _, p := range ps {
		taken, ok, err := s.TakePurge(ctx, p, later)
		if err != nil || !ok || !taken.Since.Equal(later) {
			t.Fatalf("%s/%s taken: %+v %v %v", p.Collection, p.Job, taken, ok, err)
		}
		if _, ok, err := s.TakePurge(ctx, p, later); ok || err != nil {
			t.Errorf("%s/%s taken twice from one look: %v %v", p.Collection, p.Job, ok, err)
		}
	}
	if got := show(stale(later)); got != "" {
		t.Errorf("stale right after being taken: %q", got)
	}
	taken := stale(later.Add(time.Second))
	if len(taken) != 2 {
		t.Fatalf("stale a second after being taken: %q, want both", show(taken))
	}
	for _, p := range taken {
		if err := s.EndPurge(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if got := show(stale(later.Add(time.Hour))); got != "" {
		t.Errorf("purges left after their end: %q", got)
	}
	// The job put again is another's delete to record.
	if p, ok, err := s.DeleteJob(ctx, "a", "j", later); !ok || err != nil || p.Incarnation == incs["a"] {
		t.Errorf("a/j deleted again: %+v %v %v, want its own incarnation", p, ok, err)
	}
}
