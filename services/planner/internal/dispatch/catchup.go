package dispatch

import (
	"fmt"
	"time"

	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// countCap bounds how many missed occurrences are counted one by one for the history.
const countCap = 10_000

// catchUp decides what to do with a job claimed at now whose next time is rec.Next. Of the
// occurrences due by now, only the latest may fire, and only if it is less than the catch-up
// window late; the earlier ones are skipped, never replayed in a burst (recurrence.md §7). It
// returns the occurrence to fire (zero for none), a history entry for what was skipped (nil
// for nothing), and the next time when nothing fires.
func catchUp(e *compiled, rec *store.Job, now time.Time, window time.Duration) (due time.Time, skipped *job.HistoryEntry, next time.Time) {
	latest, missed, over := rec.Next, 0, false
	if now.Sub(latest) >= window {
		// Jump over everything before the window instead of walking a long outage one by one.
		missed, over = countBetween(e, rec, latest, now.Add(-window))
		o := e.sched.Next(now.Add(-window), rec.Fired)
		if o.Done || o.Time.After(now) {
			skipped = skipEntry(rec, now, window, missed, over)
			if !o.Done {
				next = o.Time
			}
			return time.Time{}, skipped, next
		}
		latest = o.Time
	}
	for {
		o := e.sched.Next(latest, rec.Fired)
		if o.Done || o.Time.After(now) {
			break
		}
		missed++
		latest = o.Time
	}
	if missed > 0 {
		skipped = skipEntry(rec, now, window, missed, over)
	}
	return latest, skipped, time.Time{}
}

// countBetween counts the occurrences from first up to and including last, up to countCap.
func countBetween(e *compiled, rec *store.Job, first, last time.Time) (int, bool) {
	n := 1
	for t := first; n <= countCap; n++ {
		o := e.sched.Next(t, rec.Fired)
		if o.Done || o.Time.After(last) {
			return n, false
		}
		t = o.Time
	}
	return n - 1, true
}

func skipEntry(rec *store.Job, now time.Time, window time.Duration, missed int, over bool) *job.HistoryEntry {
	count := fmt.Sprint(missed)
	if over {
		count = "more than " + count
	}
	return &job.HistoryEntry{
		StartTime: now.UTC(), EndTime: now.UTC(), ExpectedExecutionTime: rec.Next,
		ActionName: job.ActionNameMain, Status: job.ExecutionSkipped,
		Message: fmt.Sprintf("skipped %s missed occurrence(s) from %s: no planner ran them in time; only the latest within the catch-up window (%v) runs",
			count, rec.Next.Format(time.RFC3339), window),
	}
}
