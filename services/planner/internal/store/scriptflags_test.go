package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// With Redis at its maxmemory the schedule goes on: a planner beats, takes a free partition,
// reads its due jobs (definition and state together) and advances them, while a new job is
// refused. Before, the heartbeat, the lease and the read were refused, and no job fired until
// memory was freed.
func TestTheScheduleRunsWhileRedisIsFull(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		srv := redistest.Start(t)
		rdb := srv.Client(t)
		scheduleRunsWhileFull(t, store.New(rdb, "test"), func(ctx context.Context, max string) error {
			return rdb.ConfigSet(ctx, "maxmemory", max).Err()
		})
	})
	t.Run("cluster", func(t *testing.T) { // the flagged scripts name every key they touch, as a cluster asks
		rdb := redistest.StartCluster(t, 3, 0).Client(t)
		scheduleRunsWhileFull(t, store.New(rdb, "test"), func(ctx context.Context, max string) error {
			return rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				return m.ConfigSet(ctx, "maxmemory", max).Err()
			})
		})
	})
}

// scheduleRunsWhileFull fills Redis (setMax "1": any use is over it) under s and runs a round of
// the schedule.
func scheduleRunsWhileFull(t *testing.T, s *store.Store, setMax func(ctx context.Context, max string) error) {
	ctx := context.Background()
	if used, err := s.UseScriptFlags(ctx); err != nil || !used {
		t.Fatalf("script flags on this Redis: %v %v", used, err)
	}
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	p := s.PartitionOf("c")
	others := []int{(p + 1) % s.Partitions()}
	if _, err := s.Acquire(ctx, []int{p}, token, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := setMax(ctx, "1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = setMax(ctx, "0") })
	if _, _, _, err := s.PutJob(ctx, store.PutJob{Collection: "c", Name: "new", Definition: []byte(`{}`), Accepted: t0, Next: t0,
		State: job.StateEnabled}); !store.OutOfMemory(err) {
		t.Fatalf("a new job at maxmemory: %v, want refused", err)
	}

	if _, err := s.Heartbeat(ctx, "a", t0, t0.Add(3*time.Second), t0.Add(-time.Minute), time.Time{}, time.Second, 10); err != nil {
		t.Errorf("heartbeat: %v", err)
	}
	if got, err := s.Acquire(ctx, others, token, time.Hour); err != nil || fmt.Sprint(got) != fmt.Sprint(others) {
		t.Errorf("acquire a free partition: %v %v", got, err)
	}
	due, _, err := s.Claim(ctx, p, token, time.Time{}, t0, 10)
	if err != nil || fmt.Sprint(due) != "[c/j]" {
		t.Fatalf("claim: %v %v", due, err)
	}
	read, err := s.LoadClaimed(ctx, due, func(int) bool { return false })
	if err != nil || read[0] == nil || string(read[0].Definition) != `{"x":1}` || !read[0].Next.Equal(t0) {
		t.Fatalf("load the claimed job: %+v %v", read, err)
	}
	held, err := s.LoadClaimed(ctx, due, func(int) bool { return true })
	if err != nil || held[0] == nil || held[0].Definition != nil || held[0].Version != read[0].Version {
		t.Fatalf("load the claimed job, its definition held: %+v %v", held, err)
	}
	if missing, err := s.LoadClaimed(ctx, []string{"c/gone"}, func(int) bool { return false }); err != nil || missing[0] != nil {
		t.Fatalf("load a job that is not there: %+v %v", missing, err)
	}
	next := t0.Add(time.Minute)
	if _, _, err := s.Advance(ctx, p, token, []store.Advance{{Collection: "c", Name: "j", Version: read[0].Version, Claimed: t0,
		Next: next, Fired: 1, Occurrence: 1, Published: t0}}); err != nil {
		t.Fatalf("advance: %v", err)
	}
	if got, err := s.GetJob(ctx, "c", "j"); err != nil || !got.Next.Equal(next) || got.Occurrence != 1 {
		t.Fatalf("after the advance: %+v %v", got, err)
	}

	// A job is disabled: its state and definition are rewritten in place, and it leaves the due
	// set. The same put not marked in place is refused.
	got, err := s.GetJob(ctx, "c", "j")
	if err != nil {
		t.Fatal(err)
	}
	disable := store.PutJob{Collection: "c", Name: "j", Definition: got.Definition, Accepted: got.Accepted,
		State: job.StateDisabled, IfVersion: got.Version, IfNext: &got.Next}
	if _, _, _, err := s.PutJob(ctx, disable); !store.OutOfMemory(err) {
		t.Fatalf("a put not in place at maxmemory: %v, want refused", err)
	}
	disable.InPlace = true
	if _, _, due, err := s.PutJob(ctx, disable); err != nil || due {
		t.Fatalf("disable the job in place: due %v, %v", due, err)
	}
	if got, err := s.GetJob(ctx, "c", "j"); err != nil || got.State != job.StateDisabled {
		t.Fatalf("after the disable: %+v %v", got, err)
	}
	got, _ = s.GetJob(ctx, "c", "j")
	enable := store.PutJob{Collection: "c", Name: "j", Definition: got.Definition, Accepted: got.Accepted, Next: next,
		State: job.StateEnabled, IfVersion: got.Version, IfNext: &got.Next, InPlace: true}
	_, version, inDue, err := s.PutJob(ctx, enable)
	if err != nil || !inDue {
		t.Fatalf("enable the job in place: due %v, %v", inDue, err)
	}

	// An operator stops a collection's jobs (the team filling Redis, say) and starts them again:
	// its state is written in place and its jobs leave the due set and come back.
	if _, err := s.SetCollectionState(ctx, "c", store.StateChange{At: t0, State: job.CollectionDisabled}); err != nil {
		t.Fatalf("disable the collection: %v", err)
	}
	if due, _, err := s.Claim(ctx, p, token, time.Time{}, next, 10); err != nil || len(due) != 0 {
		t.Fatalf("claim in a disabled collection: %v %v, want nothing", due, err)
	}
	st, err := s.SetCollectionState(ctx, "c", store.StateChange{At: t0, State: job.CollectionEnabled})
	if err != nil || fmt.Sprint(st.Unscheduled) != "[j]" {
		t.Fatalf("enable the collection: %+v %v, want j left to schedule", st, err)
	}
	// Its planner gone here, another takes the change up.
	if chs, err := s.Changes(ctx, t0.Add(time.Second), 10); err != nil || len(chs) != 1 {
		t.Fatalf("stale changes: %v %v, want the enable", chs, err)
	} else if _, ok, err := s.TakeChange(ctx, chs[0], t0.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("take up the enable: %v %v", ok, err)
	}
	if st, err := s.SetCollectionState(ctx, "c", store.StateChange{At: t0, State: job.CollectionEnabled, Then: true, After: st.Last,
		Schedule: []store.Reschedule{{Name: "j", Next: next, Version: version}}}); err != nil || len(st.Unscheduled) != 0 {
		t.Fatalf("schedule the collection's job again: %+v %v", st, err)
	}
	if due, _, err := s.Claim(ctx, p, token, time.Time{}, next, 10); err != nil || fmt.Sprint(due) != "[c/j]" {
		t.Fatalf("claim after the collection was enabled: %v %v", due, err)
	}
}

// The flags are found by asking, not by the version: a Redis user not allowed INFO has them.
func TestScriptFlagsWithoutINFO(t *testing.T) {
	rs := redistest.Start(t, redistest.WithACLUser("resched", "pw"))
	if err := rs.Client(t).Do(context.Background(), "ACL", "SETUSER", "resched", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	s := store.New(rs.Client(t), "test")
	if used, err := s.UseScriptFlags(context.Background()); err != nil || !used {
		t.Fatalf("script flags for a user not allowed INFO: %v %v", used, err)
	}
}

// Without the flags (a Redis before 7.0), the dispatcher reads nothing at maxmemory rather
// than publish occurrences it could not advance.
func TestWithoutScriptFlagsTheDispatcherReadsNothingWhileRedisIsFull(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	s := store.New(srv.Client(t), "test")
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	rdb := srv.Client(t)
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.ConfigSet(ctx, "maxmemory", "0").Err() })
	if _, err := s.LoadClaimed(ctx, []string{"c/j"}, func(int) bool { return false }); err == nil {
		t.Fatal("the dispatcher's read succeeded at maxmemory without the advance able to follow")
	}
	if got, err := s.LoadJobs(ctx, []string{"c/j"}); err != nil || got[0] == nil {
		t.Fatalf("the API's read at maxmemory: %+v %v", got, err)
	}
}
