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

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	return store.New(redistest.Start(t).Client(t), "test")
}

func putCollection(t *testing.T, s *store.Store, name string, max int) {
	t.Helper()
	if _, err := s.PutCollection(context.Background(), name, []byte(`{}`), job.CollectionEnabled, max, false); err != nil {
		t.Fatal(err)
	}
}

func putJob(t *testing.T, s *store.Store, c, j string, next time.Time) int64 {
	t.Helper()
	_, v, _, err := s.PutJob(context.Background(), store.PutJob{Collection: c, Name: j, Definition: []byte(`{"x":1}`),
		Accepted: t0, Next: next, State: job.StateEnabled, Reaccept: true})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPutJobNeedsCollectionAndRoom(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	_, _, _, err := s.PutJob(ctx, store.PutJob{Collection: "none", Name: "j", Definition: []byte(`{}`), State: job.StateEnabled})
	if !errors.Is(err, store.ErrNoCollection) {
		t.Fatalf("want ErrNoCollection, got %v", err)
	}
	putCollection(t, s, "c", 2)
	putJob(t, s, "c", "a", t0)
	putJob(t, s, "c", "b", t0)
	putJob(t, s, "c", "b", t0) // replacing an existing job needs no room
	_, _, _, err = s.PutJob(ctx, store.PutJob{Collection: "c", Name: "c", Definition: []byte(`{}`), State: job.StateEnabled})
	var q store.QuotaError
	if !errors.As(err, &q) || q.Max != 2 {
		t.Fatalf("want QuotaError{2}, got %v", err)
	}
	if names, _ := s.JobNames(ctx, "c"); fmt.Sprint(names) != "[a b]" {
		t.Fatalf("nothing may be stored on refusal: jobs %v", names)
	}
}

func TestJobRoundTripAndVersions(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	v1 := putJob(t, s, "c", "j", t0.Add(time.Minute))
	got, err := s.GetJob(ctx, "c", "j")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Definition) != `{"x":1}` || !got.Next.Equal(t0.Add(time.Minute)) || !got.Accepted.Equal(t0) || got.State != job.StateEnabled || got.Version != v1 {
		t.Fatalf("round trip: %+v", got)
	}
	_, _, _, err = s.PutJob(ctx, store.PutJob{Collection: "c", Name: "j", Definition: []byte(`{}`), State: job.StateEnabled, IfVersion: v1 + 7})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale version: want ErrConflict, got %v", err)
	}
	if _, err := s.GetJob(ctx, "c", "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}
	if _, ok, _ := s.DeleteJob(ctx, "c", "j", time.Time{}); !ok {
		t.Fatal("delete reported the job missing")
	}
	if _, err := s.GetJob(ctx, "c", "j"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// A put says when it disabled a job that was not disabled, and records it as a delete does,
// with the job's incarnation (its caller then removes the job's retries from the due stream,
// and ends the record); only then: not for a new job, an enabled one, or one put disabled
// again. Enabled again, the record ends: a planner taking it up would remove the messages of
// the job as enabled.
func TestAPutDisablingAJobRecordsItsPurge(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	put := func(state job.State) store.Applied {
		t.Helper()
		a := s.Apply(ctx, []store.Write{{Put: &store.PutJob{Collection: "c", Name: "j", Definition: []byte(`{}`),
			Next: t0, State: state, Reaccept: true, At: t0}}})[0]
		if a.Err != nil {
			t.Fatal(a.Err)
		}
		return a
	}
	born := put(job.StateDisabled).Version
	for i, step := range []struct {
		state    job.State
		disabled bool
		records  int64
	}{{job.StateEnabled, false, 0}, {job.StateEnabled, false, 0}, {job.StateDisabled, true, 1},
		{job.StateDisabled, false, 1}, {job.StateEnabled, false, 0}, {job.StateDisabled, true, 1}} {
		a := put(step.state)
		if a.Disabled != step.disabled {
			t.Errorf("put %d (%s): Disabled %v, want %v", i, step.state, a.Disabled, step.disabled)
		}
		want := store.Purge{Collection: "c", Job: "j", Incarnation: born, Since: t0}
		if a.Disabled && (a.Purge.Collection != want.Collection || a.Purge.Job != want.Job ||
			a.Purge.Incarnation != want.Incarnation || !a.Purge.Since.Equal(t0)) {
			t.Errorf("put %d: purge %+v, want %+v", i, a.Purge, want)
		}
		if n, _, err := s.PurgeBacklog(ctx); n != step.records || err != nil {
			t.Errorf("put %d (%s): %d purges recorded, %v; want %d", i, step.state, n, err, step.records)
		}
	}
	recorded, err := s.Purges(ctx, t0.Add(time.Second), 10)
	if err != nil || len(recorded) != 1 || recorded[0].Incarnation != born {
		t.Fatalf("purges before t0+1s: %+v, %v; want the job's, incarnation %d", recorded, err, born)
	}
	if err := s.EndPurge(ctx, recorded[0]); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := s.PurgeBacklog(ctx); n != 0 {
		t.Errorf("%d purges recorded after the end, want 0", n)
	}
}

// token is the lease token of the tests' planner.
const token = "planner-a"

// own takes the lease of every partition for the test's planner.
func own(t *testing.T, s *store.Store) {
	t.Helper()
	all := make([]int, s.Partitions())
	for p := range all {
		all[p] = p
	}
	if _, err := s.Acquire(context.Background(), all, token, time.Hour); err != nil {
		t.Fatal(err)
	}
}

// Only the holder of a partition's lease reads its due jobs; another planner is refused.
func TestClaimIsFencedByTheLease(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	p := s.PartitionOf("c")
	if _, _, err := s.Claim(ctx, p, token, time.Time{}, t0, 10); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("claim without the lease: %v, want ErrNotOwner", err)
	}
	own(t, s)
	if got, earliest, err := s.Claim(ctx, p, token, time.Time{}, t0.Add(-time.Second), 10); err != nil || len(got) != 0 || !earliest.Equal(t0) {
		t.Fatalf("claimed before due: %v (earliest %v, %v)", got, earliest, err)
	}
	if got, _, err := s.Claim(ctx, p, token, time.Time{}, t0, 10); err != nil || fmt.Sprint(got) != "[c/j]" {
		t.Fatalf("claim at due time: %v %v", got, err)
	}
	if _, _, err := s.Claim(ctx, p, "planner-b", time.Time{}, t0, 10); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("another planner's claim: %v, want ErrNotOwner", err)
	}
	if _, _, err := s.Advance(ctx, p, "planner-b", []store.Advance{{Collection: "c", Name: "j", Claimed: t0}}); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("another planner's advance: %v, want ErrNotOwner", err)
	}
}

// A claim with a lower bound reads only the jobs due after it, and its earliest is the earliest
// after it: the jobs due by the end of an outage still settling wait, the others go on.
func TestClaimDueAfterLeavesTheEarlierJobs(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "in-outage", t0)
	putJob(t, s, "c", "at-its-end", t0.Add(time.Second))
	putJob(t, s, "c", "after", t0.Add(2*time.Second))
	putJob(t, s, "c", "later", t0.Add(time.Minute))
	own(t, s)
	p := s.PartitionOf("c")
	got, earliest, err := s.Claim(ctx, p, token, t0.Add(time.Second), t0.Add(10*time.Second), 10)
	if err != nil || fmt.Sprint(got) != "[c/after]" || !earliest.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("claim due after %v: %v, earliest %v, %v; want [c/after], earliest %v", t0.Add(time.Second), got, earliest, err, t0.Add(2*time.Second))
	}
	got, earliest, err = s.Claim(ctx, p, token, t0.Add(10*time.Second), t0.Add(10*time.Second), 10)
	if err != nil || len(got) != 0 || !earliest.Equal(t0.Add(time.Minute)) {
		t.Fatalf("nothing due in the range: %v, earliest %v, %v; want none, earliest %v", got, earliest, err, t0.Add(time.Minute))
	}
	got, earliest, err = s.Claim(ctx, p, token, time.Time{}, t0.Add(10*time.Second), 10)
	if err != nil || fmt.Sprint(got) != "[c/in-outage c/at-its-end c/after]" || !earliest.Equal(t0) {
		t.Fatalf("claim without a bound: %v, earliest %v, %v", got, earliest, err)
	}
}

// claimOne reads job c/j, due at due, as the lease holder.
func claimOne(t *testing.T, s *store.Store, c, j string, due time.Time) (int, *store.Job) {
	t.Helper()
	p := s.PartitionOf(c)
	if got, _, err := s.Claim(context.Background(), p, token, time.Time{}, due, 10); err != nil || fmt.Sprint(got) != "["+c+"/"+j+"]" {
		t.Fatalf("job %s/%s not due in partition %d at %v: %v %v", c, j, p, due, got, err)
	}
	rec, err := s.GetJob(context.Background(), c, j)
	if err != nil {
		t.Fatal(err)
	}
	return p, rec
}

func TestAdvanceIsCompareAndSet(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	own(t, s)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	p, read := claimOne(t, s, "c", "j", t0)
	// A stale read (the job was put again meanwhile) moves nothing.
	putJob(t, s, "c", "j", t0.Add(time.Hour))
	if _, _, err := s.Advance(ctx, p, token, []store.Advance{{Collection: "c", Name: "j", Version: read.Version, Claimed: t0,
		Next: t0.Add(time.Minute), Fired: 1, Occurrence: 1, Published: t0}}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetJob(ctx, "c", "j")
	if !got.Next.Equal(t0.Add(time.Hour)) || got.Fired != 0 {
		t.Fatalf("stale advance changed the job: %+v", got)
	}
	// The right read moves it and re-scores it in the due set.
	if _, earliest, err := s.Advance(ctx, p, token, []store.Advance{{Collection: "c", Name: "j", Version: got.Version,
		Claimed: t0.Add(time.Hour), Next: t0.Add(2 * time.Hour), Fired: 1, Occurrence: 1, Published: t0.Add(time.Hour)}}); err != nil ||
		!earliest.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("advance: earliest %v, %v", earliest, err)
	}
	got, _ = s.GetJob(ctx, "c", "j")
	if !got.Next.Equal(t0.Add(2*time.Hour)) || got.Fired != 1 || got.Occurrence != 1 {
		t.Fatalf("advance: %+v", got)
	}
	if n, _ := s.DueBacklog(ctx, t0.Add(2*time.Hour-time.Millisecond)); n != 0 {
		t.Fatalf("due before its next time: backlog %d", n)
	}
	if n, _ := s.DueBacklog(ctx, t0.Add(2*time.Hour)); n != 1 {
		t.Fatalf("not due at its next time: backlog %d", n)
	}
}

// A job deleted and put again is a new job: its version is new, never one the deleted job had,
// so no cache or compare-and-set mistakes it for the old one. The same next time is no excuse
// either (the ABA of a re-put).
func TestVersionsNeverRepeat(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	own(t, s)
	putCollection(t, s, "c", 0)
	seen := map[int64]bool{}
	for range 3 {
		v := putJob(t, s, "c", "j", t0)
		if seen[v] {
			t.Fatalf("version %d given twice", v)
		}
		seen[v] = true
		if _, _, err := s.DeleteJob(ctx, "c", "j", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	v := putJob(t, s, "c", "j", t0)
	p, read := claimOne(t, s, "c", "j", t0)
	if _, _, err := s.DeleteJob(ctx, "c", "j", time.Time{}); err != nil {
		t.Fatal(err)
	}
	putJob(t, s, "c", "j", t0) // same next time, new job
	if _, _, err := s.Advance(ctx, p, token, []store.Advance{{Collection: "c", Name: "j", Version: read.Version, Claimed: t0,
		Next: t0.Add(time.Minute), Fired: 1, Occurrence: 1, Published: t0}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetJob(ctx, "c", "j"); got.Version == v || got.Fired != 0 || !got.Next.Equal(t0) {
		t.Fatalf("the deleted job's advance moved the new one: %+v (old version %d)", got, v)
	}
}

// The last occurrence ends the job when its final result arrives, whichever comes first: the
// advance that ends the series or the result.
func TestJobEndsWithItsLastOccurrence(t *testing.T) {
	for _, resultFirst := range []bool{false, true} {
		for _, faulted := range []bool{false, true} {
			t.Run(fmt.Sprintf("resultFirst=%v/faulted=%v", resultFirst, faulted), func(t *testing.T) {
				ctx := context.Background()
				s := newStore(t)
				own(t, s)
				putCollection(t, s, "c", 0)
				putJob(t, s, "c", "j", t0)
				p, read := claimOne(t, s, "c", "j", t0)
				advance := func() []store.Ended {
					ended, _, err := s.Advance(ctx, p, token, []store.Advance{{Collection: "c", Name: "j", Version: read.Version, Claimed: t0, Fired: 1, Occurrence: 1, Published: t0}})
					if err != nil {
						t.Fatal(err)
					}
					return ended
				}
				result := func() job.State {
					st := job.ExecutionCompleted
					if faulted {
						st = job.ExecutionFailed
					}
					state, err := s.ApplyResult(ctx, "c", "j", store.Outcome{Entry: job.HistoryEntry{StartTime: t0, EndTime: t0, ExpectedExecutionTime: t0,
						ActionName: job.ActionNameMain, Status: st, RepeatCount: 1}, Scheduled: t0, Occurrence: 1, MainDone: true, Final: true, Faulted: faulted}, t0)
					if err != nil {
						t.Fatal(err)
					}
					return state
				}
				want := job.StateCompleted
				if faulted {
					want = job.StateFaulted
				}
				var ended []store.Ended
				var state job.State
				if resultFirst {
					state = result()
					ended = advance()
					if state != "" || len(ended) != 1 || ended[0].State != want {
						t.Fatalf("result then advance: result said %q, advance ended %v; want the advance to end it %s", state, ended, want)
					}
				} else {
					ended = advance()
					state = result()
					if len(ended) != 0 || state != want {
						t.Fatalf("advance then result: advance ended %v, result said %q; want the result to end it %s", ended, state, want)
					}
				}
				got, _ := s.GetJob(ctx, "c", "j")
				if got.State != want || got.Executions != 1 || (got.Faults == 1) != faulted {
					t.Fatalf("job after its end: %+v", got)
				}
			})
		}
	}
}

func TestHistoryIsCappedAndNewestFirst(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", time.Time{})
	old := t0.Add(-store.HistoryMaxAge - time.Hour)
	for i, at := range []time.Time{old, t0} {
		_, err := s.ApplyResult(ctx, "c", "j", store.Outcome{Entry: job.HistoryEntry{StartTime: at, ActionName: job.ActionNameMain,
			Status: job.ExecutionCompleted, RepeatCount: i + 1}, Scheduled: at}, t0)
		if err != nil {
			t.Fatal(err)
		}
	}
	entries := make([]job.HistoryEntry, store.HistoryMaxEntries+5)
	for i := range entries {
		entries[i] = job.HistoryEntry{StartTime: t0.Add(time.Duration(i+1) * time.Second), ActionName: job.ActionNameMain, Status: job.ExecutionFailed, RepeatCount: i + 3}
	}
	if err := s.AppendHistory(ctx, "c", "j", entries...); err != nil {
		t.Fatal(err)
	}
	h, err := s.History(ctx, "c", "j", t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != store.HistoryMaxEntries || h[0].RepeatCount != len(entries)+2 || h[len(h)-1].RepeatCount != 8 {
		t.Fatalf("history: %d entries, newest %d, oldest %d", len(h), h[0].RepeatCount, h[len(h)-1].RepeatCount)
	}
}

// A result delivered again (the planner died between applying and acknowledging it) is a
// no-op, also after newer results of the same job were applied meanwhile.
func TestApplyResultIgnoresARedelivery(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	result := func(id string, scheduled time.Time, attempt int, mainDone bool) store.Outcome {
		return store.Outcome{ID: id, Entry: job.HistoryEntry{StartTime: scheduled, ActionName: job.ActionNameMain,
			Status: job.ExecutionFailed, RetryCount: attempt}, Scheduled: scheduled, Occurrence: 1, MainDone: mainDone}
	}
	for _, o := range []store.Outcome{
		result("a.MainAction.0", t0, 0, true),
		result("a.MainAction.0", t0, 0, true), // at once
		result("b.MainAction.0", t0.Add(time.Minute), 0, true),
		result("c.MainAction.0", t0.Add(2*time.Minute), 0, true),
		result("a.MainAction.0", t0, 0, true), // after newer ones
	} {
		if _, err := s.ApplyResult(ctx, "c", "j", o, t0.Add(3*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.GetJob(ctx, "c", "j")
	h, _ := s.History(ctx, "c", "j", t0)
	if got.Executions != 3 || got.Failures != 3 || len(h) != 3 {
		t.Fatalf("after redeliveries: executions %d, failures %d, %d history entries; want 3, 3, 3", got.Executions, got.Failures, len(h))
	}
}

// Results applied out of order (one refused by Redis comes back after newer ones) leave the
// job's last execution at the newest, and a series whose last occurrence ended before an
// earlier one still ends with the series. Before, the late result set both back: the last
// execution to its own, and the job, its last occurrence seemingly still running, was never
// Completed.
func TestResultsAppliedOutOfOrder(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	own(t, s)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	p, read := claimOne(t, s, "c", "j", t0)
	second := t0.Add(time.Minute)
	result := func(id string, scheduled time.Time, occ int) store.Outcome {
		return store.Outcome{ID: id, Entry: job.HistoryEntry{StartTime: scheduled, ActionName: job.ActionNameMain,
			Status: job.ExecutionCompleted}, Scheduled: scheduled, Occurrence: occ, MainDone: true, Final: true}
	}
	// Both occurrences ran, the second one's result first, before the planner moved the job on.
	for _, o := range []store.Outcome{result("second", second, 2), result("first", t0, 1)} {
		if _, err := s.ApplyResult(ctx, "c", "j", o, t0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.GetJob(ctx, "c", "j")
	if !got.LastExecution.Equal(second) || got.Executions != 2 {
		t.Fatalf("after a late result: last execution %v, %d executions; want %v, 2", got.LastExecution, got.Executions, second)
	}
	// The series is over with its second occurrence.
	ended, _, err := s.Advance(ctx, p, token, []store.Advance{{Collection: "c", Name: "j", Version: read.Version, Claimed: t0,
		Fired: 2, Occurrence: 2, Published: second}})
	if err != nil || len(ended) != 1 || ended[0].State != job.StateCompleted {
		t.Fatalf("the end of the series: %+v %v, want the job Completed", ended, err)
	}
}

// The ids of applied results are remembered for the result memory at least: a redelivery
// within it is ignored; older ids are dropped (at every eighth occurrence of the job), so the
// set does not grow with the job's life.
func TestAppliedResultIDsAreForgottenAfterTheirMemory(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	s := store.New(rdb, "test", store.WithResultMemory(time.Minute))
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	apply := func(id string, occurrence int, now time.Time) {
		t.Helper()
		o := store.Outcome{ID: id, Entry: job.HistoryEntry{StartTime: now, ActionName: job.ActionNameMain,
			Status: job.ExecutionCompleted}, Scheduled: now, Occurrence: occurrence, MainDone: true}
		if _, err := s.ApplyResult(ctx, "c", "j", o, now); err != nil {
			t.Fatal(err)
		}
	}
	for occ := 1; occ <= 7; occ++ {
		apply(fmt.Sprint("r", occ), occ, t0.Add(time.Duration(occ)*time.Second))
	}
	apply("r3", 3, t0.Add(50*time.Second)) // a redelivery within the memory
	apply("r8", 8, t0.Add(5*time.Minute))  // drops the ids older than a minute before it
	apply("r8", 8, t0.Add(5*time.Minute))  // a redelivery of the newest
	key := fmt.Sprintf("test:{p%02d}:rid:c/j", s.PartitionOf("c"))
	if ids, err := rdb.ZRange(ctx, key, 0, -1).Result(); err != nil || fmt.Sprint(ids) != "[r8]" {
		t.Errorf("remembered ids %v (%v), want [r8]", ids, err)
	}
	got, _ := s.GetJob(ctx, "c", "j")
	if h, _ := s.History(ctx, "c", "j", t0); got.Executions != 8 || len(h) != 8 {
		t.Errorf("executions %d, %d history entries; want 8, 8", got.Executions, len(h))
	}
}

// History entries older than the retention age are never read, and leave Redis with the job's
// next result.
func TestAgedHistoryIsSweptAndNeverRead(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	s := store.New(rdb, "test", store.WithHistory(100, time.Hour, 100))
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	apply := func(occurrence int, at time.Time) {
		t.Helper()
		o := store.Outcome{Entry: job.HistoryEntry{StartTime: at, ActionName: job.ActionNameMain, Status: job.ExecutionCompleted,
			RepeatCount: occurrence}, Scheduled: at, Occurrence: occurrence, MainDone: true}
		if _, err := s.ApplyResult(ctx, "c", "j", o, at); err != nil {
			t.Fatal(err)
		}
	}
	for occ := 1; occ <= 3; occ++ {
		apply(occ, t0.Add(time.Duration(occ)*time.Minute))
	}
	later := t0.Add(2 * time.Hour) // the three entries are older than an hour now
	key := fmt.Sprintf("test:{p%02d}:hist:c/j", s.PartitionOf("c"))
	for occ := 4; occ <= 8; occ++ {
		apply(occ, later.Add(time.Duration(occ)*time.Second))
		h, err := s.History(ctx, "c", "j", later.Add(10*time.Second))
		if err != nil || len(h) != occ-3 || h[len(h)-1].RepeatCount != 4 {
			t.Fatalf("after occurrence %d: %d entries read, want %d (%v)", occ, len(h), occ-3, err)
		}
		if n, err := rdb.LLen(ctx, key).Result(); err != nil || n != int64(occ-3) {
			t.Fatalf("after occurrence %d: %d entries kept, want %d (%v)", occ, n, occ-3, err)
		}
	}
}

// An occurrence counts once in executionCount, at the result that ends its main action, however
// its attempts interleave with another occurrence's and whichever attempt was lost with a worker.
func TestExecutionCountCountsOccurrences(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	apply := func(id string, scheduled time.Time, attempt int, mainDone bool) {
		o := store.Outcome{ID: id, Entry: job.HistoryEntry{StartTime: scheduled, ActionName: job.ActionNameMain,
			Status: job.ExecutionFailed, RetryCount: attempt}, Scheduled: scheduled, Occurrence: 1, MainDone: mainDone}
		if _, err := s.ApplyResult(ctx, "c", "j", o, t0); err != nil {
			t.Fatal(err)
		}
	}
	apply("a1", t0, 1, false) // attempt 0 lost with its worker
	apply("b0", t0.Add(time.Minute), 0, false)
	apply("a2", t0, 2, true) // the first occurrence's last attempt, after the second began
	apply("b1", t0.Add(time.Minute), 1, true)
	got, _ := s.GetJob(ctx, "c", "j")
	if got.Executions != 2 || got.Failures != 4 {
		t.Fatalf("executions %d, failures %d; want 2 occurrences and 4 failed attempts", got.Executions, got.Failures)
	}
}

// Two attempts of one occurrence may both end its main action: a worker whose link to NATS hung
// delivered it and reported it once back, after another worker had delivered the redelivery.
// The occurrence counts once; each attempt keeps its history entry. Before, it counted twice
// (make chaos, TestWorkerLinkToNATSHangs: 28 jobs of 40 over the target's count).
func TestAnOccurrenceEndedTwiceCountsOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	for _, attempt := range []int{2, 1} { // the hung worker's report comes last
		o := store.Outcome{ID: fmt.Sprint("attempt-", attempt), Entry: job.HistoryEntry{StartTime: t0, ActionName: job.ActionNameMain,
			Status: job.ExecutionCompleted, RetryCount: attempt}, Scheduled: t0, Occurrence: 1, MainDone: true, Tag: "tag-of-t0"}
		if _, err := s.ApplyResult(ctx, "c", "j", o, t0); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.GetJob(ctx, "c", "j")
	history, err := s.History(ctx, "c", "j", t0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Executions != 1 || len(history) != 2 {
		t.Fatalf("executions %d, %d history entries; want the occurrence once and both attempts", got.Executions, len(history))
	}
}

// A write that keeps a job's schedule (a patch of its action, a re-encryption) must not undo
// a move the dispatcher made after the job was read: the move keeps the version, so the
// next fire time read is checked too.
func TestKeepingTheScheduleDoesNotUndoAnAdvance(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	own(t, s)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	p, read := claimOne(t, s, "c", "j", t0)
	if _, _, err := s.Advance(ctx, p, token, []store.Advance{{Collection: "c", Name: "j", Version: read.Version, Claimed: t0,
		Next: t0.Add(time.Minute), Fired: 1, Occurrence: 1, Published: t0}}); err != nil {
		t.Fatal(err)
	}
	keep := store.PutJob{Collection: "c", Name: "j", Definition: []byte(`{"x":2}`), Accepted: read.Accepted,
		Next: read.Next, State: job.StateEnabled, IfVersion: read.Version, IfNext: &read.Next}
	if _, _, _, err := s.PutJob(ctx, keep); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a write of the next time read before an advance: %v, want ErrConflict", err)
	}
	got, _ := s.GetJob(ctx, "c", "j")
	if !got.Next.Equal(t0.Add(time.Minute)) {
		t.Fatalf("next %v after a refused write", got.Next)
	}
	keep.Next, keep.IfNext = got.Next, &got.Next
	if _, _, _, err := s.PutJob(ctx, keep); err != nil {
		t.Fatalf("a write of a fresh read: %v", err)
	}
	if got, _ = s.GetJob(ctx, "c", "j"); string(got.Definition) != `{"x":2}` || !got.Next.Equal(t0.Add(time.Minute)) || got.Fired != 1 {
		t.Fatalf("after the write: %+v", got)
	}
}

// Results are recorded a partition's batch per script call: in order within a job, across
// calls and partitions, a result id repeated within the batch a no-op, and a result Redis
// refuses failing alone.
func TestApplyResultsRecordsABatchInOrder(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s := store.New(rdb, "test")
	var colls []string
	partitions := map[int]bool{}
	for i := range 6 {
		c := fmt.Sprint("c", i)
		colls = append(colls, c)
		partitions[s.PartitionOf(c)] = true
		putCollection(t, s, c, 0)
		putJob(t, s, c, "j", t0)
	}
	if len(partitions) < 2 {
		t.Fatalf("the collections fall in %d partition: the test needs several", len(partitions))
	}
	putJob(t, s, "c0", "broken", t0)
	if err := rdb.Set(ctx, fmt.Sprintf("test:{p%02d}:hist:c0/broken", s.PartitionOf("c0")), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var batch []store.Result
	add := func(c, j, id string, occ int, final bool) {
		at := t0.Add(time.Duration(occ) * time.Minute)
		batch = append(batch, store.Result{Collection: c, Job: j, Outcome: store.Outcome{ID: id, Scheduled: at, Occurrence: occ,
			MainDone: true, Final: final, Entry: job.HistoryEntry{StartTime: at, ActionName: job.ActionNameMain,
				Status: job.ExecutionCompleted, RepeatCount: occ}}})
	}
	const perJob = 150 // more than one call holds
	for occ := 1; occ <= perJob; occ++ {
		for _, c := range colls {
			add(c, "j", fmt.Sprint(c, ".", occ), occ, false)
		}
		if occ == 7 {
			add("c0", "broken", "broken.1", 1, false)
			add("c1", "j", "c1.7", 7, false) // delivered twice in one batch
		}
	}
	applied := s.ApplyResults(ctx, batch, t0.Add(time.Hour))
	for i, a := range applied {
		if broken := batch[i].Job == "broken"; (a.Err != nil) != broken {
			t.Errorf("result %d of %s/%s: error %v", i, batch[i].Collection, batch[i].Job, a.Err)
		}
	}
	for _, c := range colls {
		got, err := s.GetJob(ctx, c, "j")
		if err != nil {
			t.Fatal(err)
		}
		h, _ := s.History(ctx, c, "j", t0)
		if got.Executions != perJob || len(h) != perJob || h[0].RepeatCount != perJob || h[perJob-1].RepeatCount != 1 {
			t.Errorf("%s/j: %d executions, %d history entries; want %d each, newest first", c, got.Executions, len(h), perJob)
		}
	}
}

// With Redis down every result of a batch fails (the consumer leaves it to be delivered again);
// once Redis is back, without the scripts it had loaded, results are recorded again.
func TestApplyResultsWithRedisDownAndBack(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	s := store.New(srv.Client(t), "test")
	result := store.Result{Collection: "c", Job: "j", Outcome: store.Outcome{ID: "r1", Scheduled: t0, Occurrence: 1, MainDone: true,
		Entry: job.HistoryEntry{StartTime: t0, ActionName: job.ActionNameMain, Status: job.ExecutionCompleted, RepeatCount: 1}}}
	srv.Stop()
	for i, a := range s.ApplyResults(ctx, []store.Result{result, result}, t0) {
		if a.Err == nil {
			t.Errorf("result %d applied with Redis down", i)
		}
	}
	srv.Start() // empty: no script loaded, no job
	if a := s.ApplyResults(ctx, []store.Result{result}, t0)[0]; a.Err != nil || a.State != "" {
		t.Fatalf("after Redis came back, for a job it no longer holds: %+v", a)
	}
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	if a := s.ApplyResults(ctx, []store.Result{result}, t0)[0]; a.Err != nil {
		t.Fatalf("after Redis came back: %v", a.Err)
	}
	if got, _ := s.GetJob(ctx, "c", "j"); got.Executions != 1 {
		t.Fatalf("after Redis came back: %d executions, want 1", got.Executions)
	}
}
