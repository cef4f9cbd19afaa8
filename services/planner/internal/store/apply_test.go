package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

func stampedPut(c, j string, seq uint64, def string) store.Write {
	return store.Write{Put: &store.PutJob{Collection: c, Name: j, Definition: []byte(def), Accepted: t0, Next: t0,
		State: job.StateEnabled, Reaccept: true, Stamp: store.Stamp{Epoch: 1, Seq: seq}}}
}

func stampedDelete(c, j string, seq uint64) store.Write {
	return store.Write{Delete: &store.DeleteJob{Collection: c, Name: j, Stamp: store.Stamp{Epoch: 1, Seq: seq}}}
}

// Intake messages applied out of order end as the newest says: an older put after a newer put
// or after a delete changes nothing; a delete older than the job's last put is stale.
func TestStampedWritesEndAsTheNewestSays(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	res := s.Apply(ctx, []store.Write{
		stampedPut("c", "a", 5, `{"v":5}`),
		stampedPut("c", "a", 3, `{"v":3}`), // older, after: stale
		stampedDelete("c", "a", 4),         // older than the put of 5: stale
		stampedDelete("c", "b", 9),         // a delete before the put it follows
		stampedPut("c", "b", 8, `{"v":8}`), // older than that delete: stale
	})
	want := []string{"created", "stale", "stale", "gone", "stale"}
	for i, a := range res {
		got := "gone"
		switch {
		case a.Err != nil:
			got = a.Err.Error()
		case a.Stale:
			got = "stale"
		case a.Created:
			got = "created"
		}
		if got != want[i] {
			t.Errorf("write %d: %s, want %s", i, got, want[i])
		}
	}
	if rec, err := s.GetJob(ctx, "c", "a"); err != nil || string(rec.Definition) != `{"v":5}` {
		t.Errorf("job a: %v %v", rec, err)
	}
	if _, err := s.GetJob(ctx, "c", "b"); err == nil {
		t.Error("job b came back from an older put")
	}
	// A newer put after the delete brings b back; an unstamped (API) write always applies.
	if a := s.Apply(ctx, []store.Write{stampedPut("c", "b", 10, `{"v":10}`)})[0]; a.Err != nil || a.Stale || !a.Created {
		t.Errorf("newer put: %+v", a)
	}
	if _, _, _, err := s.PutJob(ctx, store.PutJob{Collection: "c", Name: "a", Definition: []byte(`{"v":"api"}`), Accepted: t0, State: job.StateEnabled}); err != nil {
		t.Fatal(err)
	}
	if a := s.Apply(ctx, []store.Write{stampedPut("c", "a", 4, `{"v":4}`)})[0]; !a.Stale {
		t.Errorf("an intake message older than the job's last intake message, after an API put: %+v", a)
	}
}

// The job index pages by name at the same cost at any depth, and the sets of earlier versions
// become sorted sets at the first start.
func TestJobIndexPagesAndMigrates(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	old := store.New(rdb, "m")
	if err := old.CheckLayout(ctx); err != nil {
		t.Fatal(err)
	}
	putCollection(t, old, "c", 0)
	// An index written by an earlier version: a plain set.
	key := fmt.Sprintf("m:{p%02d}:jobs:c", old.PartitionOf("c"))
	for i := range 25 {
		rdb.SAdd(ctx, key, fmt.Sprintf("j%02d", i))
	}
	rdb.HDel(ctx, "m:{ctl}:meta", "index")
	s := store.New(rdb, "m")
	if err := s.CheckLayout(ctx); err != nil {
		t.Fatal(err)
	}
	if typ := rdb.Type(ctx, key).Val(); typ != "zset" {
		t.Fatalf("index type %s after the start, want zset", typ)
	}
	var all []string
	for after := ""; ; {
		page, err := s.JobNamesAfter(ctx, "c", after, 10)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if len(page) < 10 {
			break
		}
		after = page[len(page)-1]
	}
	if len(all) != 25 || all[0] != "j00" || all[24] != "j24" {
		t.Errorf("paged %v", all)
	}
}
