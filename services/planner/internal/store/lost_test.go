package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// A delivery that left no result (its worker killed mid-delivery) gets a Failed entry of its
// own before the attempt that followed it, once: a copy of the later result adds nothing, and
// the lost attempt's own result, coming late (its worker cut off rather than killed), is taken
// for a copy. A delivery past the retry policy runs the last attempt again, under an id of its
// own: each delivery shows once, whichever reported.
func TestADeliveryLeftWithoutAResultIsRecordedLost(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	result := func(id string, attempt, delivery int, status job.ExecutionStatus, lost ...store.Lost) store.Outcome {
		return store.Outcome{ID: id, Entry: job.HistoryEntry{StartTime: t0.Add(time.Duration(delivery) * time.Second), ActionName: job.ActionNameMain,
			Status: status, RetryCount: attempt, RepeatCount: 1}, Scheduled: t0, Occurrence: 1, Delivery: delivery, Lost: lost}
	}
	third := result("t.MainAction.2", 2, 3, job.ExecutionCompleted,
		store.Lost{Delivery: 1, ID: "t.MainAction.0"}, store.Lost{Delivery: 2, ID: "t.MainAction.1"})
	apply := func(j string, os ...store.Outcome) []job.HistoryEntry {
		t.Helper()
		for _, o := range os {
			if _, err := s.ApplyResult(ctx, "c", j, o, t0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		h, _ := s.History(ctx, "c", j, t0.Add(time.Minute))
		return h
	}
	h := apply("j",
		result("t.MainAction.0", 0, 1, job.ExecutionFailed), // recorded: delivery 1 is no loss
		third,
		third, // a copy
		result("t.MainAction.1", 1, 2, job.ExecutionFailed), // delivery 2's own, late
	)
	checkEntries(t, h, []string{"0 Failed " + t0.Add(time.Second).String(), "1 Failed " + store.LostMessage(2, 3), "2 Completed " + t0.Add(3*time.Second).String()})

	// A policy without retries: every delivery runs attempt 0, and its entry counts the
	// deliveries before it (bus.Result.HistoryEntry). The first was recorded, the second left
	// no result, the third's is recorded beside the first, and a copy of the third's adds
	// nothing.
	putJob(t, s, "c", "k", t0)
	rerun := result("k.MainAction.0#3", 2, 3, job.ExecutionCompleted,
		store.Lost{Delivery: 1, ID: "k.MainAction.0"}, store.Lost{Delivery: 2, ID: "k.MainAction.0#2"})
	h = apply("k", result("k.MainAction.0", 0, 1, job.ExecutionCompleted), rerun, rerun)
	checkEntries(t, h, []string{"0 Completed " + t0.Add(time.Second).String(), "1 Failed " + store.LostMessage(2, 3), "2 Completed " + t0.Add(3*time.Second).String()})
}

// A delivery past the retry policy (its first run's acknowledgement lost) reports the last
// attempt again under an id of its own: the history shows both calls, failureCount counts
// both, and the occurrence counts once as executed and once as faulted.
func TestARerunPastThePolicyCountsItsOccurrenceOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	putCollection(t, s, "c", 0)
	putJob(t, s, "c", "j", t0)
	for d, id := range []string{"f.MainAction.0", "f.MainAction.0#2"} {
		o := store.Outcome{ID: id, Entry: job.HistoryEntry{StartTime: t0.Add(time.Duration(d) * time.Second), ActionName: job.ActionNameMain,
			Status: job.ExecutionFailed, RetryCount: d, RepeatCount: 1}, Scheduled: t0, Occurrence: 1, Tag: "f", Delivery: d + 1,
			MainDone: true, Final: true, Faulted: true}
		if _, err := s.ApplyResult(ctx, "c", "j", o, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.GetJob(ctx, "c", "j")
	h, _ := s.History(ctx, "c", "j", t0.Add(time.Minute))
	if len(h) != 2 || got.Failures != 2 || got.Executions != 1 || got.Faults != 1 {
		t.Errorf("%d entries, %d failures, %d executions, %d faults; want 2, 2, 1, 1", len(h), got.Failures, got.Executions, got.Faults)
	}
}

// checkEntries compares a history, newest first, with want, oldest first: each entry's retry
// count, status, and its message when it has one, else its start time.
func checkEntries(t *testing.T, h []job.HistoryEntry, want []string) {
	t.Helper()
	var got []string
	for _, e := range slices.Backward(h) {
		what := e.Message
		if what == "" {
			what = e.StartTime.String()
		}
		got = append(got, fmt.Sprint(e.RetryCount, " ", e.Status, " ", what))
	}
	if !slices.Equal(got, want) {
		t.Errorf("history, oldest first:\n got %q\nwant %q", got, want)
	}
}
