package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// Moving the data to another partition count keeps every collection, job, history entry,
// place in the due set, remembered delete and deleted job's purge, and no version repeats afterwards: growing
// (4 → 16), shrinking (16 → 3), and on a Redis Cluster, where a collection moves between
// masters.
func TestRepartitionKeepsEverything(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to int
		cluster  bool
	}{{"grow", 4, 16, false}, {"shrink", 16, 3, false}, {"cluster", 16, 64, true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cluster && testing.Short() {
				t.Skip("starts a Redis Cluster")
			}
			var rdb redis.UniversalClient
			if tc.cluster {
				rdb = redistest.StartCluster(t, 3, 0).Client(t)
			} else {
				rdb = redistest.Start(t).Client(t)
			}
			before := store.New(rdb, "test", store.WithPartitions(tc.from))
			top := fill(t, before, 12)
			want := snapshot(t, before)

			after := store.New(rdb, "test", store.WithPartitions(tc.to))
			if err := after.CheckLayout(context.Background()); !errors.Is(err, store.ErrLayout) {
				t.Fatalf("a planner at the new count before the move: %v, want ErrLayout", err)
			}
			r, err := after.Repartition(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.From != tc.from || r.To != tc.to || r.Collections != 12 || r.Moved == 0 {
				t.Errorf("repartitioned %+v, want from %d to %d, 12 collections, some moved", r, tc.from, tc.to)
			}
			checkMoved(t, after, want, top)
			if stray := strayKeys(t, rdb, after); len(stray) > 0 {
				t.Errorf("keys left where the new count does not look: %q", stray)
			}
		})
	}
}

// A Redis nothing was written to has no layout to move: the count is recorded, and a planner at
// it starts.
func TestRepartitionOfNothingRecordsTheCount(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s := store.New(rdb, "test", store.WithPartitions(64))
	r, err := s.Repartition(ctx, nil)
	if err != nil || r.From != 64 || r.To != 64 || r.Moved != 0 {
		t.Fatalf("repartitioned %+v, %v; want from 64 to 64, nothing moved", r, err)
	}
	if err := store.New(rdb, "test", store.WithPartitions(16)).CheckLayout(ctx); !errors.Is(err, store.ErrLayout) {
		t.Errorf("a planner at 16 after 64 was recorded: %v, want ErrLayout", err)
	}
	if err := s.CheckLayout(ctx); err != nil {
		t.Errorf("a planner at 64: %v", err)
	}
}

// A move stopped half way (the process killed, Redis gone) leaves the layout marked as moving:
// no planner starts on it, at either count, and the move run again finishes it.
func TestRepartitionStoppedHalfWayFinishesWhenRunAgain(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	before := store.New(rdb, "test", store.WithPartitions(4))
	top := fill(t, before, 12)
	want := snapshot(t, before)

	after := store.New(rdb, "test", store.WithPartitions(16))
	ctx, cancel := context.WithCancel(context.Background())
	moved := 0
	if _, err := after.Repartition(ctx, func(string) {
		if moved++; moved == 3 {
			cancel()
		}
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a move stopped after 3 collections: %v", err)
	}
	for _, s := range []*store.Store{before, after} {
		if err := s.CheckLayout(context.Background()); !errors.Is(err, store.ErrLayout) {
			t.Errorf("a planner at %d partitions during the move: %v, want ErrLayout", s.Partitions(), err)
		}
	}
	if _, err := store.New(rdb, "test", store.WithPartitions(8)).Repartition(context.Background(), nil); !errors.Is(err, store.ErrLayout) {
		t.Errorf("a move to another count begun during this one: %v, want ErrLayout", err)
	}
	r, err := after.Repartition(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Moved+3 < 4 {
		t.Errorf("the second run moved %d collections", r.Moved)
	}
	checkMoved(t, after, want, top)
	if stray := strayKeys(t, rdb, after); len(stray) > 0 {
		t.Errorf("keys left where the new count does not look: %q", stray)
	}
}

// No move while a planner may write: a partition's lease held, or a planner's heartbeat live,
// refuses it, and nothing is marked.
func TestRepartitionRefusedWhileAPlannerMayWrite(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	before := store.New(rdb, "test", store.WithPartitions(4))
	fill(t, before, 2)
	if _, err := before.Acquire(ctx, []int{2}, "planner-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	after := store.New(rdb, "test", store.WithPartitions(16))
	if _, err := after.Repartition(ctx, nil); !errors.Is(err, store.ErrPlannersRunning) {
		t.Fatalf("a move with a lease held: %v, want ErrPlannersRunning", err)
	}
	if err := before.CheckLayout(ctx); err != nil {
		t.Errorf("the planners' layout after a refused move: %v", err)
	}
	if err := before.Release(ctx, 2, "planner-1"); err != nil {
		t.Fatal(err)
	}
	// A planner alive (its heartbeat not run out) with no lease yet refuses it too.
	if _, err := before.Heartbeat(ctx, "planner-2", time.Now(), time.Now().Add(time.Minute), time.Now(), time.Time{}, time.Second, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := after.Repartition(ctx, nil); !errors.Is(err, store.ErrPlannersRunning) || !strings.Contains(err.Error(), "planner-2") {
		t.Fatalf("a move with a planner alive: %v, want ErrPlannersRunning naming it", err)
	}
	if err := before.CheckLayout(ctx); err != nil {
		t.Errorf("the planners' layout after a refused move: %v", err)
	}
}

// fill puts n collections of three jobs each: one due, with a history entry and a result id;
// one not due (disabled); one deleted from the intake, which the partition remembers. It
// returns the highest version written.
func fill(t *testing.T, s *store.Store, n int) int64 {
	t.Helper()
	ctx := context.Background()
	if err := s.CheckLayout(ctx); err != nil {
		t.Fatal(err)
	}
	var top int64
	for i := range n {
		c := fmt.Sprintf("coll-%02d", i)
		if _, err := s.PutCollection(ctx, c, fmt.Appendf(nil, `{"n":%d}`, i), job.CollectionEnabled, 0, false); err != nil {
			t.Fatal(err)
		}
		top = max(top, putJob(t, s, c, "due", t0.Add(time.Duration(i)*time.Second)))
		if _, v, _, err := s.PutJob(ctx, store.PutJob{Collection: c, Name: "off", Definition: []byte(`{"off":1}`), Accepted: t0,
			State: job.StateDisabled, Reaccept: true}); err != nil {
			t.Fatal(err)
		} else {
			top = max(top, v)
		}
		for _, w := range s.Apply(ctx, []store.Write{
			{Put: &store.PutJob{Collection: c, Name: "gone", Definition: []byte(`{}`), Accepted: t0, Next: t0, State: job.StateEnabled,
				Reaccept: true, Stamp: store.Stamp{Epoch: 1, Seq: uint64(10 * (i + 1))}}},
			{Delete: &store.DeleteJob{Collection: c, Name: "gone", Stamp: store.Stamp{Epoch: 1, Seq: uint64(10*(i+1) + 1)}}},
		}) {
			if w.Err != nil {
				t.Fatal(w.Err)
			}
			top = max(top, w.Version)
		}
		if _, err := s.ApplyResult(ctx, c, "due", outcome("r-"+c, 1, job.ExecutionCompleted), t0); err != nil {
			t.Fatal(err)
		}
	}
	// A change left unfinished, as by a planner stopped after its first call (enabling an
	// enabled collection answers its disabled job, "off", to compute): it moves too.
	if _, err := s.SetCollectionState(ctx, "coll-03", store.StateChange{State: job.CollectionEnabled, At: t0}); err != nil {
		t.Fatal(err)
	}
	return top
}

// held is what a store holds of the collections fill put.
type held struct {
	Collections map[string]string // name: definition
	Jobs        map[string]store.Job
	History     map[string][]job.HistoryEntry
	Due         map[string]int // every due member, claimed from every partition: its partition
	Unfinished  []string       // the collections with a change under way, and its kind
	Purges      []string       // the deleted jobs' purges, "c/j@incarnation since"
}

func snapshot(t *testing.T, s *store.Store) held {
	t.Helper()
	ctx := context.Background()
	h := held{Collections: map[string]string{}, Jobs: map[string]store.Job{}, History: map[string][]job.HistoryEntry{}, Due: map[string]int{}}
	names, err := s.CollectionNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range names {
		if !s.Indexed(ctx, c) { // checked before a listing, which builds it again at a cost
			t.Fatalf("%s is not in its partition's index", c)
		}
	}
	if listed, _, err := s.CollectionNamesAfter(ctx, "", len(names)+1); !slices.Equal(listed, names) || err != nil {
		t.Fatalf("listed %v %v, want %v", listed, err, names)
	}
	for _, c := range names {
		coll, err := s.GetCollection(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		h.Collections[c] = string(coll.Definition)
		jobs, err := s.JobNames(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			got, err := s.GetJob(ctx, c, j)
			if err != nil {
				t.Fatal(err)
			}
			h.Jobs[c+"/"+j] = *got
			if h.History[c+"/"+j], err = s.History(ctx, c, j, t0); err != nil {
				t.Fatal(err)
			}
		}
	}
	changes, err := s.Changes(ctx, t0.Add(time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range changes {
		if ch, ok, err := s.TakeChange(ctx, ch, ch.Last); err != nil || !ok { // taken at its own time: unchanged
			t.Fatalf("the unfinished change of %s: %v %v", ch.Collection, ok, err)
		} else {
			h.Unfinished = append(h.Unfinished, ch.Collection+" "+ch.Kind)
		}
	}
	purges, err := s.Purges(ctx, time.Now().Add(time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range purges {
		// Taken at its own time (unchanged) from its collection's partition: it is there.
		if _, ok, err := s.TakePurge(ctx, p, p.Since); err != nil || !ok {
			t.Fatalf("the purge of %s/%s: %v %v", p.Collection, p.Job, ok, err)
		}
		h.Purges = append(h.Purges, fmt.Sprintf("%s/%s@%d %s", p.Collection, p.Job, p.Incarnation, p.Since.Format(time.RFC3339Nano)))
	}
	slices.Sort(h.Purges)
	all := make([]int, s.Partitions())
	for p := range all {
		all[p] = p
	}
	token := fmt.Sprint("snapshot-", time.Now().UnixNano())
	got, err := s.Acquire(ctx, all, token, time.Minute)
	if err != nil || len(got) != len(all) {
		t.Fatalf("leases for the snapshot: %v, %v", got, err)
	}
	for p := range all {
		members, _, err := s.Claim(ctx, p, token, time.Time{}, t0.Add(time.Hour), 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range members {
			h.Due[m] = p
		}
		if err := s.Release(ctx, p, token); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// checkMoved checks that s, at its new count, holds what want says, remembers the deletes, and
// gives versions above top.
func checkMoved(t *testing.T, s *store.Store, want held, top int64) {
	t.Helper()
	ctx := context.Background()
	if err := s.CheckLayout(ctx); err != nil {
		t.Fatalf("a planner at the new count after the move: %v", err)
	}
	got := snapshot(t, s)
	if !maps.Equal(got.Collections, want.Collections) {
		t.Errorf("collections %v, want %v", got.Collections, want.Collections)
	}
	if !reflect.DeepEqual(got.Jobs, want.Jobs) {
		t.Errorf("jobs differ:\n got %+v\nwant %+v", got.Jobs, want.Jobs)
	}
	if !reflect.DeepEqual(got.History, want.History) {
		t.Errorf("history differs:\n got %+v\nwant %+v", got.History, want.History)
	}
	if fmt.Sprint(want.Unfinished) != "[coll-03 Enabled]" || !slices.Equal(got.Unfinished, want.Unfinished) {
		t.Errorf("unfinished changes %v, want %v ([coll-03 Enabled])", got.Unfinished, want.Unfinished)
	}
	if len(want.Purges) != 12 || !slices.Equal(got.Purges, want.Purges) {
		t.Errorf("purges %v, want %v (12)", got.Purges, want.Purges)
	}
	if len(want.Due) != 12 || !slices.Equal(slices.Sorted(maps.Keys(got.Due)), slices.Sorted(maps.Keys(want.Due))) {
		t.Errorf("due %v, want %v (12)", got.Due, want.Due)
	}
	for m, p := range got.Due {
		if c, _, _ := strings.Cut(m, "/"); p != s.PartitionOf(c) {
			t.Errorf("%s is due in partition %d, its collection is in %d", m, p, s.PartitionOf(c))
		}
	}
	for c := range want.Collections {
		// An intake put older than the delete the old partition remembered stays stale.
		a := s.Apply(ctx, []store.Write{{Put: &store.PutJob{Collection: c, Name: "gone", Definition: []byte(`{}`), Accepted: t0, Next: t0,
			State: job.StateEnabled, Reaccept: true, Stamp: store.Stamp{Epoch: 1, Seq: 1}}}})[0]
		if a.Err != nil || !a.Stale {
			t.Errorf("%s: an intake put older than the job's delete: %+v, want stale", c, a)
		}
		if v := putJob(t, s, c, "new", t0); v <= top {
			t.Errorf("%s: a job put after the move has version %d, not above %d: a version repeats", c, v, top)
		}
	}
}

// strayKeys lists the keys of partitions s does not have, and the keys of a collection or job
// under another partition's tag than its collection's.
func strayKeys(t *testing.T, rdb redis.UniversalClient, s *store.Store) []string {
	t.Helper()
	ctx := context.Background()
	var all []string
	scan := func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, "test:{p*").Result()
		all = append(all, keys...)
		return err
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(ctx, c)
		})
	} else {
		err = scan(ctx, rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	var stray []string
	for _, k := range all {
		var p int
		var rest string
		if _, err := fmt.Sscanf(k, "test:{p%d}:%s", &p, &rest); err != nil {
			t.Fatalf("key %q: %v", k, err)
		}
		kind, name, named := strings.Cut(rest, ":")
		c, _, _ := strings.Cut(name, "/")
		if p >= s.Partitions() || (named && kind != "gone" && p != s.PartitionOf(c)) {
			stray = append(stray, k)
		}
	}
	return stray
}

// The race a move must not lose: a planner checks the layout at start just before the move
// begins, and beats only after it has. Its heartbeat is refused while the data moves (it takes
// no lease), and once the data is at the new count, refused as laid out otherwise (it stops).
func TestAPlannerThatCheckedTheLayoutBeforeAMoveTakesNoLease(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	old := store.New(rdb, "test", store.WithPartitions(4))
	fill(t, old, 4)
	if err := old.CheckLayout(ctx); err != nil { // the planner's start
		t.Fatal(err)
	}
	beat := func() error {
		_, err := old.Heartbeat(ctx, "late", t0, t0.Add(time.Hour), t0, time.Time{}, time.Second, 10)
		return err
	}
	moved := store.New(rdb, "test", store.WithPartitions(16))
	if _, err := moved.Repartition(ctx, func(string) {
		if err := beat(); !errors.Is(err, store.ErrRepartitioning) {
			t.Errorf("a heartbeat during the move: %v, want ErrRepartitioning", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := beat(); !errors.Is(err, store.ErrLayout) {
		t.Errorf("a heartbeat at 4 partitions after the move to 16: %v, want ErrLayout", err)
	}
	if _, err := moved.Heartbeat(ctx, "new", t0, t0.Add(time.Hour), t0, time.Time{}, time.Second, 10); err != nil {
		t.Errorf("a heartbeat at the new count: %v", err)
	}
}
