package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// A page of collections is read in one round trip, in the order named, with each one's job
// count; one deleted since its name was read is left out rather than failing the page.
func TestGetCollectionsReadsAPage(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, c := range []string{"a", "b", "c"} {
		putCollection(t, s, c, 0)
	}
	putJob(t, s, "c", "j1", t0)
	putJob(t, s, "c", "j2", t0)
	if ok, err := s.DeleteCollection(ctx, "b", time.Now()); !ok || err != nil {
		t.Fatalf("delete b: %v %v", ok, err)
	}
	got, err := s.GetCollections(ctx, []string{"c", "b", "a", "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "c" || got[0].JobCount != 2 || got[1].Name != "a" || got[1].JobCount != 0 || got[0].Generation == "" {
		t.Fatalf("got %+v, want c (2 jobs) then a (none)", got)
	}
	one, err := s.GetCollection(ctx, "c")
	if err != nil || string(one.Definition) != string(got[0].Definition) || one.State != got[0].State {
		t.Fatalf("read alone: %+v %v, in a page: %+v", one, err, got[0])
	}
}

// A large collection is deleted a bounded number of jobs a Redis call: one call for every job
// held Redis, and every planner's dispatch with it, for 3.4 s for 300,000 jobs. Every key of
// the collection goes, and its jobs leave the due set; another collection's stay.
func TestALargeCollectionIsDeletedInBoundedCalls(t *testing.T) {
	ctx := context.Background()
	rs := redistest.Start(t)
	rdb := rs.Client(t)
	s := store.New(rdb, "test")
	putCollection(t, s, "big", 0)
	putCollection(t, s, "other", 0)
	const n = 2500
	for i := range n {
		putJob(t, s, "big", fmt.Sprintf("j%04d", i), t0)
	}
	putJob(t, s, "other", "keep", t0)
	calls, most := rs.ScriptCalls(t, func() {
		if ok, err := s.DeleteCollection(ctx, "big", time.Now()); !ok || err != nil {
			t.Fatalf("delete big: %v %v", ok, err)
		}
	})
	if calls < 3 || most > 4*1000+4 {
		t.Errorf("the deletion made %d script calls, the largest with %d keys: want several, none with more than 1,000 jobs' keys", calls, most)
	}
	if left, _ := rdb.Keys(ctx, "*big*").Result(); len(left) != 0 {
		t.Errorf("keys left of the deleted collection: %d, such as %v", len(left), left[:min(3, len(left))])
	}
	if n, _ := s.DueBacklog(ctx, t0); n != 1 {
		t.Errorf("due after the delete: %d, want the other collection's job alone", n)
	}
	if names, _ := s.CollectionNames(ctx); fmt.Sprint(names) != "[other]" {
		t.Errorf("collections left: %v", names)
	}
}

func TestCollectionDisableAndDelete(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	v := putJob(t, s, "c", "j", t0)
	if st, err := s.SetCollectionState(ctx, "c", store.StateChange{At: t0, State: job.CollectionDisabled}); err != nil || !st.Done {
		t.Fatal(st, err)
	}
	if n, _ := s.DueBacklog(ctx, t0); n != 0 {
		t.Fatalf("a disabled collection's job is still due (%d)", n)
	}
	putJob(t, s, "c", "k", t0) // a job put into a disabled collection waits too
	if n, _ := s.DueBacklog(ctx, t0); n != 0 {
		t.Fatalf("a job put into a disabled collection is due (%d)", n)
	}
	// Enabling answers the jobs not in the due set; the next call schedules those computed.
	st, err := s.SetCollectionState(ctx, "c", store.StateChange{At: t0, State: job.CollectionEnabled})
	if err != nil || fmt.Sprint(st.Unscheduled) != "[j k]" || !st.Done {
		t.Fatalf("enabling: %+v %v, want j and k to schedule", st, err)
	}
	st, err = s.SetCollectionState(ctx, "c", store.StateChange{At: t0, State: job.CollectionEnabled, Then: true, After: st.Last,
		Schedule: []store.Reschedule{{Name: "j", Next: t0.Add(time.Hour), Version: v}}})
	if err != nil || len(st.Unscheduled) != 0 || !st.Done {
		t.Fatalf("scheduling: %+v %v", st, err)
	}
	if n, _ := s.DueBacklog(ctx, t0.Add(time.Hour)); n != 1 {
		t.Fatalf("after enabling: backlog %d, want 1 (j)", n)
	}
	// A later call of a change overtaken by another stops.
	if _, err := s.SetCollectionState(ctx, "c", store.StateChange{At: t0, State: job.CollectionDisabled}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.SetCollectionState(ctx, "c", store.StateChange{At: t0, State: job.CollectionEnabled, Then: true}); err != nil || !st.Overtaken {
		t.Fatalf("an enable's later call after a disable: %+v %v, want it overtaken", st, err)
	}
	if ok, err := s.DeleteCollection(ctx, "c", time.Now()); !ok || err != nil {
		t.Fatalf("delete collection: %v %v", ok, err)
	}
	if names, _ := s.CollectionNames(ctx); len(names) != 0 {
		t.Fatalf("collections left: %v", names)
	}
	if _, err := s.GetJob(ctx, "c", "j"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("job of a deleted collection: %v", err)
	}
	if n, _ := s.DueBacklog(ctx, t0.Add(time.Hour)); n != 0 {
		t.Fatalf("due jobs left: %d", n)
	}
}
