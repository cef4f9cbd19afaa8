package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// A state change is recorded from its first call to its end, with where a call takes it up
// again; it is stale once its last call is older than the cutoff asked, and taken up once.
// A record an earlier release leaves behind (it sets a state, or deletes a collection, and
// records nothing) is dropped rather than taken up again and again. On one Redis, and on a
// Redis Cluster of 3 masters (the changes are read from every partition).
func TestUnfinishedChanges(t *testing.T) { onServerAndCluster(t, testUnfinishedChanges) }

// onServerAndCluster runs test on one Redis server, then on a Redis Cluster of 3 masters
// (skipped with -short): what reads every partition reads every master there.
func onServerAndCluster(t *testing.T, test func(*testing.T, redis.UniversalClient)) {
	t.Run("server", func(t *testing.T) { test(t, redistest.Start(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a Redis Cluster")
		}
		test(t, redistest.StartCluster(t, 3, 0).Client(t))
	})
}

func testUnfinishedChanges(t *testing.T, rdb redis.UniversalClient) {
	ctx := context.Background()
	s := store.New(rdb, "test")
	stale := func(cutoff time.Time) string {
		t.Helper()
		chs, err := s.Changes(ctx, cutoff, 10)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, ch := range chs {
			out += fmt.Sprintf("%s@%s ", ch.Collection, ch.Last.Format(time.TimeOnly))
		}
		return out
	}
	// A disable done in one call stays recorded until its caller has purged its jobs' messages
	// and ended it; an end of a change that another overtook leaves that one's record.
	for _, c := range []string{"a", "b"} {
		putCollection(t, s, c, 0)
		putJob(t, s, c, "j", t0)
		if st, err := s.SetCollectionState(ctx, c, store.StateChange{State: job.CollectionDisabled, At: t0}); err != nil || !st.Done {
			t.Fatal(st, err)
		}
	}
	if got := stale(t0.Add(time.Hour)); got != "a@12:00:00 b@12:00:00 " {
		t.Fatalf("disables done in one call, not ended: %q", got)
	}
	for _, c := range []string{"a", "b"} {
		if err := s.EndChange(ctx, c, job.CollectionSuspended); err != nil {
			t.Fatal(err)
		}
	}
	if got := stale(t0.Add(time.Hour)); got != "a@12:00:00 b@12:00:00 " {
		t.Fatalf("disables ended as suspensions: %q", got)
	}
	for _, c := range []string{"a", "b"} {
		if err := s.EndChange(ctx, c, job.CollectionDisabled); err != nil {
			t.Fatal(err)
		}
	}
	if got := stale(t0.Add(time.Hour)); got != "" {
		t.Fatalf("disables ended left %q", got)
	}
	// An enable's first call answers j to compute: not done until the next call schedules it.
	for _, c := range []string{"a", "b"} {
		if st, err := s.SetCollectionState(ctx, c, store.StateChange{State: job.CollectionEnabled, At: t0}); err != nil || len(st.Unscheduled) != 1 {
			t.Fatal(st, err)
		}
	}
	if got := stale(t0); got != "" {
		t.Errorf("stale before its last call: %q", got)
	}
	if got := stale(t0.Add(time.Second)); got != "a@12:00:00 b@12:00:00 " {
		t.Errorf("stale a second after: %q", got)
	}
	chs, _ := s.Changes(ctx, t0.Add(time.Second), 10)
	later := t0.Add(time.Minute)
	ch, ok, err := s.TakeChange(ctx, chs[0], later)
	if err != nil || !ok || ch.Kind != "Enabled" || ch.From != "" || !ch.Last.Equal(later) {
		t.Fatalf("taken: %+v %v %v, want Enabled from the first job, at a minute", ch, ok, err)
	}
	if _, ok, err := s.TakeChange(ctx, chs[0], later); ok || err != nil {
		t.Errorf("taken twice from one look: %v %v", ok, err)
	}
	if got := stale(t0.Add(2 * time.Second)); got != "b@12:00:00 " {
		t.Errorf("stale after a was taken up: %q", got)
	}
	// A planner of an earlier release disables a (a state, no record); the later call of
	// this release's enable finds it overtaken and drops its record.
	if err := rdb.HSet(ctx, s.CollectionKey("a"), "state", string(job.CollectionDisabled)).Err(); err != nil {
		t.Fatal(err)
	}
	if st, err := s.SetCollectionState(ctx, "a", store.StateChange{State: job.CollectionEnabled, Then: true, At: later}); err != nil || !st.Overtaken {
		t.Fatalf("a later call after another release's disable: %+v %v", st, err)
	}
	// A planner of an earlier release deletes b (its hash goes, its name stays listed here): it
	// is taken up as a delete, whose messages may still be on the due stream, and ended.
	if err := rdb.Del(ctx, s.CollectionKey("b")).Err(); err != nil {
		t.Fatal(err)
	}
	chs, _ = s.Changes(ctx, later.Add(time.Hour), 10)
	if len(chs) != 1 || chs[0].Collection != "b" || chs[0].Kind != store.ChangeDelete {
		t.Fatalf("changes after b's hash went: %+v, want b's delete", chs)
	}
	if ch, ok, err := s.TakeChange(ctx, chs[0], later.Add(time.Minute)); !ok || err != nil || ch.Kind != store.ChangeDelete {
		t.Fatalf("b taken up: %+v %v %v, want a delete", ch, ok, err)
	}
	if err := s.EndDelete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := stale(later.Add(time.Hour)); got != "" {
		t.Errorf("records left: %q", got)
	}
	// A collection deleted is recorded until its delete is ended (its messages purged from the
	// due stream): its name takes no put meanwhile.
	putCollection(t, s, "c", 0)
	if ok, err := s.DeleteCollection(ctx, "c", later); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if got := stale(later.Add(time.Second)); got != "c@12:01:00 " {
		t.Errorf("after c's delete: %q", got)
	}
	if _, err := s.PutCollection(ctx, "c", []byte(`{}`), job.CollectionEnabled, 0, false); !errors.Is(err, store.ErrDeleting) {
		t.Errorf("put of c before its delete ended: %v, want ErrDeleting", err)
	}
	if err := s.EndDelete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutCollection(ctx, "c", []byte(`{}`), job.CollectionEnabled, 0, false); err != nil {
		t.Errorf("put of c after its delete ended: %v", err)
	}
}
