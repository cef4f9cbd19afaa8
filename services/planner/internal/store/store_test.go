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
	if _, err := s.PutCollection(context.Background(), name, []byte(`{}`), job.CollectionEnabled, max); err != nil {
		t.Fatal(err)
	}
}

func putJob(t *testing.T, s *store.Store, c, j string, next time.Time) int64 {
	t.Helper()
	_, v, err := s.PutJob(context.Background(), store.PutJob{Collection: c, Name: j, Definition: []byte(`{"x":1}`),
		Accepted: t0, Next: next, State: job.StateEnabled, Reaccept: true})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPutJobNeedsCollectionAndRoom(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	_, _, err := s.PutJob(ctx, store.PutJob{Collection: "none", Name: "j", Definition: []byte(`{}`), State: job.StateEnabled})
	if !errors.Is(err, store.ErrNoCollection) {
		t.Fatalf("want ErrNoCollection, got %v", err)
	}
	putCollection(t, s, "c", 2)
	putJob(t, s, "c", "a", t0)
	putJob(t, s, "c", "b", t0)
	putJob(t, s, "c", "b", t0) // replacing an existing job needs no room
	_, _, err = s.PutJob(ctx, store.PutJob{Collection: "c", Name: "c", Definition: []byte(`{}`), State: job.StateEnabled})
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
	_, _, err = s.PutJob(ctx, store.PutJob{Collection: "c", Name: "j", Definition: []byte(`{}`), State: job.StateEnabled, IfVersion: v1 + 7})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale version: want ErrConflict, got %v", err)
	}
	if _, err := s.GetJob(ctx, "c", "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}
	if ok, _ := s.DeleteJob(ctx, "c", "j"); !ok {
		t.Fatal("delete reported the job missing")
	}
	if _, err := s.GetJob(ctx, "c", "j"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// A claim leases a job: nobody else gets it until the lease ends, then anybody may.
func TestClaimLeases(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	p := partition(t, s, "c", "j", t0)
	if got, _ := s.Claim(ctx, p, t0.Add(-time.Second), t0.Add(59*time.Second), 10); len(got) != 0 {
		t.Fatalf("claimed before due: %v", got)
	}
	if got, _ := s.Claim(ctx, p, t0, t0.Add(30*time.Second), 10); fmt.Sprint(got) != "[c/j]" {
		t.Fatalf("claim at due time: %v", got)
	}
	if got, _ := s.Claim(ctx, p, t0.Add(29*time.Second), t0.Add(89*time.Second), 10); len(got) != 0 {
		t.Fatalf("claimed during the lease: %v", got)
	}
	if got, _ := s.Claim(ctx, p, t0.Add(30*time.Second), t0.Add(90*time.Second), 10); fmt.Sprint(got) != "[c/j]" {
		t.Fatalf("claim after the lease: %v", got)
	}
}

func partition(t *testing.T, s *store.Store, c, j string, due time.Time) int {
	t.Helper()
	p := store.PartitionOf(c)
	if got, err := s.Claim(context.Background(), p, due, due, 10); err != nil || fmt.Sprint(got) != "["+c+"/"+j+"]" {
		t.Fatalf("job %s/%s not due in partition %d at %v: %v %v", c, j, p, due, got, err)
	}
	return p
}

func TestAdvanceIsCompareAndSet(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	p := partition(t, s, "c", "j", t0)
	// A stale claim (the job was put again meanwhile) moves nothing.
	putJob(t, s, "c", "j", t0.Add(time.Hour))
	if _, err := s.Advance(ctx, p, []store.Advance{{Collection: "c", Name: "j", Claimed: t0, Next: t0.Add(time.Minute), Fired: 1, Occurrence: 1, Published: t0}}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetJob(ctx, "c", "j")
	if !got.Next.Equal(t0.Add(time.Hour)) || got.Fired != 0 {
		t.Fatalf("stale advance changed the job: %+v", got)
	}
	// The right claim moves it and re-scores it in the due set.
	if _, err := s.Advance(ctx, p, []store.Advance{{Collection: "c", Name: "j", Claimed: t0.Add(time.Hour), Next: t0.Add(2 * time.Hour), Fired: 1, Occurrence: 1, Published: t0.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
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

// The last occurrence ends the job when its final result arrives, whichever comes first: the
// advance that ends the series or the result.
func TestJobEndsWithItsLastOccurrence(t *testing.T) {
	for _, resultFirst := range []bool{false, true} {
		for _, faulted := range []bool{false, true} {
			t.Run(fmt.Sprintf("resultFirst=%v/faulted=%v", resultFirst, faulted), func(t *testing.T) {
				ctx := context.Background()
				s := newStore(t)
				putCollection(t, s, "c", 0)
				putJob(t, s, "c", "j", t0)
				p := partition(t, s, "c", "j", t0)
				advance := func() []store.Ended {
					ended, err := s.Advance(ctx, p, []store.Advance{{Collection: "c", Name: "j", Claimed: t0, Fired: 1, Occurrence: 1, Published: t0}})
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
						ActionName: job.ActionNameMain, Status: st, RepeatCount: 1}, Scheduled: t0, Final: true, Faulted: faulted}, t0)
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

func TestCollectionDisableAndDelete(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	v := putJob(t, s, "c", "j", t0)
	if err := s.SetCollectionState(ctx, "c", job.CollectionDisabled, nil); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.DueBacklog(ctx, t0); n != 0 {
		t.Fatalf("a disabled collection's job is still due (%d)", n)
	}
	putJob(t, s, "c", "k", t0) // a job put into a disabled collection waits too
	if n, _ := s.DueBacklog(ctx, t0); n != 0 {
		t.Fatalf("a job put into a disabled collection is due (%d)", n)
	}
	if err := s.SetCollectionState(ctx, "c", job.CollectionEnabled, []store.Reschedule{{Name: "j", Next: t0.Add(time.Hour), Version: v}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.DueBacklog(ctx, t0.Add(time.Hour)); n != 1 {
		t.Fatalf("after enabling: backlog %d, want 1", n)
	}
	if ok, err := s.DeleteCollection(ctx, "c"); !ok || err != nil {
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

// A result delivered twice (the planner died between applying and acknowledging it) counts once.
func TestApplyResultIgnoresARedelivery(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	o := store.Outcome{ID: "tag.MainAction.0", Entry: job.HistoryEntry{StartTime: t0, ActionName: job.ActionNameMain,
		Status: job.ExecutionFailed, RepeatCount: 1}, Scheduled: t0}
	for range 2 {
		if _, err := s.ApplyResult(ctx, "c", "j", o, t0); err != nil {
			t.Fatal(err)
		}
	}
	o.ID, o.Entry.RetryCount = "tag.MainAction.1", 1
	if _, err := s.ApplyResult(ctx, "c", "j", o, t0); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetJob(ctx, "c", "j")
	h, _ := s.History(ctx, "c", "j", t0)
	if got.Executions != 1 || got.Failures != 2 || len(h) != 2 {
		t.Fatalf("after a redelivery: executions %d, failures %d, %d history entries; want 1, 2, 2", got.Executions, got.Failures, len(h))
	}
}

// The first result of an occurrence counts it as executed, also when attempt 0 never reported
// (its worker died): executionCount counts occurrences, not attempts.
func TestExecutionCountCountsOccurrences(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	apply := func(id string, scheduled time.Time, attempt int) {
		o := store.Outcome{ID: id, Entry: job.HistoryEntry{StartTime: scheduled, ActionName: job.ActionNameMain,
			Status: job.ExecutionFailed, RetryCount: attempt}, Scheduled: scheduled}
		if _, err := s.ApplyResult(ctx, "c", "j", o, t0); err != nil {
			t.Fatal(err)
		}
	}
	apply("a1", t0, 1) // attempt 0 lost with its worker
	apply("a2", t0, 2)
	apply("b0", t0.Add(time.Minute), 0)
	got, _ := s.GetJob(ctx, "c", "j")
	if got.Executions != 2 || got.Failures != 3 {
		t.Fatalf("executions %d, failures %d; want 2 occurrences and 3 failed attempts", got.Executions, got.Failures)
	}
}
