package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
// or after a delete changes nothing; a delete older than the job's last put is stale. The last
// message applied, delivered again, is stale too, and told apart (Again).
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
		stampedPut("c", "a", 5, `{"v":5}`), // the put of 5 delivered again
		stampedDelete("c", "b", 9),         // the delete of 9 delivered again
	})
	want := []string{"created", "stale", "stale", "gone", "stale", "again", "again"}
	for i, a := range res {
		got := "gone"
		switch {
		case a.Err != nil:
			got = a.Err.Error()
		case a.Again && a.Stale:
			got = "again"
		case a.Again:
			got = "again without stale"
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

// The puts of a batch go to Redis a partition's puts per script call: each still has its own
// outcome (a refused put or a Redis error fails alone), and a delete between puts of its
// partition is applied between them.
func TestApplyStoresEachPutOfABatchAlone(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	s := store.New(rdb, "test")
	putCollection(t, s, "a", 2)
	putCollection(t, s, "b", 0)
	// A key of the wrong type makes the put of b/bad fail inside Redis.
	bad := fmt.Sprintf("test:{p%02d}:st:b/bad", s.PartitionOf("b"))
	if err := rdb.Set(ctx, bad, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	put := func(c, j string) store.Write {
		return store.Write{Put: &store.PutJob{Collection: c, Name: j, Definition: []byte(`{"j":"` + j + `"}`),
			Accepted: t0, Next: t0, State: job.StateEnabled, Reaccept: true}}
	}
	ifVersion := put("b", "cas")
	ifVersion.Put.IfVersion = 99
	writes := []store.Write{
		put("a", "1"), put("a", "2"),
		put("a", "3"), // over the quota of 2
		put("none", "x"),
		ifVersion,
		put("b", "bad"),
		put("b", "2"),
		{Delete: &store.DeleteJob{Collection: "a", Name: "1"}},
		put("a", "4"), // room again, after the delete
	}
	for i := range 150 { // more puts of one partition than one call takes
		writes = append(writes, put("b", fmt.Sprintf("n%03d", i)))
	}
	res := s.Apply(ctx, writes)
	want := []string{"created", "created", "quota", "no collection", "conflict", "WRONGTYPE", "created", "existed", "created"}
	for len(want) < len(writes) {
		want = append(want, "created")
	}
	var q store.QuotaError
	versions := map[string]bool{} // versions never repeat within a partition
	for i, a := range res {
		version := fmt.Sprintf("%d %d", s.PartitionOf(collectionOf(writes[i])), a.Version)
		got := "created"
		switch {
		case errors.As(a.Err, &q) && q.Max == 2:
			got = "quota"
		case errors.Is(a.Err, store.ErrNoCollection):
			got = "no collection"
		case errors.Is(a.Err, store.ErrConflict):
			got = "conflict"
		case a.Err != nil && strings.Contains(a.Err.Error(), "WRONGTYPE"):
			got = "WRONGTYPE"
		case a.Err != nil:
			got = a.Err.Error()
		case writes[i].Delete != nil && a.Created:
			got = "existed"
		case !a.Created || !a.Due || a.Version == 0 || versions[version]:
			got = fmt.Sprintf("%+v", a)
		}
		versions[version] = true
		if got != want[i] {
			t.Errorf("write %d: %s, want %s", i, got, want[i])
		}
	}
	if names, _ := s.JobNames(ctx, "a"); fmt.Sprint(names) != "[2 4]" {
		t.Errorf("jobs of a: %v", names)
	}
	for _, j := range []string{"2", "n000", "n149"} {
		if rec, err := s.GetJob(ctx, "b", j); err != nil || string(rec.Definition) != `{"j":"`+j+`"}` {
			t.Errorf("job b/%s: %v %v", j, rec, err)
		}
	}
}

func collectionOf(w store.Write) string {
	if w.Put != nil {
		return w.Put.Collection
	}
	return w.Delete.Collection
}
