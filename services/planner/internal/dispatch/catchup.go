package dispatch

import (
	"fmt"
	"strings"
	"time"

	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// scanCap bounds how many missed occurrences one claim looks at one by one (a job due every
// second missed for a day): past it they are counted no further.
const scanCap = 100_000

// rules are the catch-up settings a claim is planned with.
type rules struct {
	window  time.Duration     // an occurrence this late or later never fires
	policy  job.CatchUpPolicy // for a job without its own
	burst   int               // most occurrences one job fires per claim
	pace    time.Duration     // the wait before the next burst of a job with more to fire
	outages []store.Outage    // when no planner ran, newest first
}

// firing is what a claimed job does now.
type firing struct {
	fire    []time.Time       // occurrences to publish, in order
	fired   int               // the job's executions since acceptance, after these
	next    time.Time         // the job's next time afterwards; zero when the series is over
	dueAt   time.Time         // when it is due again if sooner than next would say (a paced burst)
	skipped *job.HistoryEntry // what did not fire and why; nil when nothing was skipped
}

// plan decides what a job claimed at now does with its occurrences due by now (docs/
// architecture.md, "Catch-up"):
//   - one more than the catch-up window late never fires;
//   - one that fell due while a planner ran, which was only late (a planner died and another
//     took its partition over, Redis or NATS were away), fires;
//   - of those that fell due while every planner was down, the job's policy decides: Latest
//     fires only the latest of them, All fires every one;
//   - at most burst fire per claim, in order; the rest wait pace and fire in the next claims.
//
// Every occurrence ends up fired or skipped (recorded in the history), never both: a claim
// stops at the first occurrence it leaves for later, so a later claim sees only what this one
// did not decide.
func plan(e *compiled, rec *store.Job, now time.Time, r rules) firing {
	f := firing{fired: rec.Fired}
	var skip skipped
	t := rec.Next
	if now.Sub(t) >= r.window {
		// Jump over everything before the window instead of walking a long outage one by one.
		n, over, last := countBetween(e, rec, t, now.Add(-r.window))
		skip.add(t, last, n, over, "more than the catch-up window ("+r.window.String()+") late")
		o := e.sched.Next(now.Add(-r.window), rec.Fired)
		if o.Done {
			f.skipped = skip.entry(now)
			return f
		}
		t = o.Time
	}
	// A job read ahead of its time (the lookahead) fires its next occurrence, at that time.
	horizon := now
	if t.After(now) {
		horizon = t
	}
	due, after := dueBy(e, rec, t, horizon)
	policy := r.policy
	if p := e.catchUp; p != "" {
		policy = p
	}
	latest := -1 // Latest: the one occurrence of an outage that fires
	if policy != job.CatchUpAll {
		for i := len(due) - 1; i >= 0; i-- {
			if inOutage(r.outages, due[i]) {
				latest = i
				break
			}
		}
	}
	for i, o := range due {
		if out := inOutage(r.outages, o); out && policy != job.CatchUpAll && i != latest {
			skip.add(o, o, 1, false, "no planner ran (catch-up policy Latest: only the latest of these runs)")
			continue
		}
		if e.sched.CountMet(f.fired) {
			f.skipped = skip.entry(now) // recurrence.count is used up: the series is over
			return f
		}
		if len(f.fire) == r.burst {
			// More to fire than one claim may: the rest come in the next claims, pace apart.
			f.next, f.dueAt, f.skipped = o, now.Add(r.pace), skip.entry(now)
			return f
		}
		f.fire = append(f.fire, o)
		f.fired++
	}
	if n := len(f.fire); n > 0 {
		if o := e.sched.Next(f.fire[n-1], f.fired); !o.Done {
			f.next = o.Time
		}
	} else {
		f.next = after
	}
	f.skipped = skip.entry(now)
	return f
}

// dueBy lists the occurrences from first (included) up to now, and returns the first one after
// now (zero when the series ends first). The count does not stop the list: plan applies it as
// it fires.
func dueBy(e *compiled, rec *store.Job, first, now time.Time) (due []time.Time, after time.Time) {
	for t := first; ; {
		if t.After(now) {
			return due, t
		}
		if len(due) == scanCap {
			return due, t
		}
		due = append(due, t)
		o := e.sched.Next(t, rec.Fired)
		if o.Done {
			return due, time.Time{}
		}
		t = o.Time
	}
}

// countBetween counts the occurrences from first up to and including last, up to scanCap; it
// reports whether it stopped counting, and the last one it counted.
func countBetween(e *compiled, rec *store.Job, first, last time.Time) (int, bool, time.Time) {
	n, t := 1, first
	for ; n <= scanCap; n++ {
		o := e.sched.Next(t, rec.Fired)
		if o.Done || o.Time.After(last) {
			return n, false, t
		}
		t = o.Time
	}
	return n - 1, true, t
}

// inOutage reports whether t fell inside an interval in which no planner ran.
func inOutage(outages []store.Outage, t time.Time) bool {
	for _, o := range outages {
		if t.After(o.From) && t.Before(o.To) {
			return true
		}
	}
	return false
}

// skipped gathers the occurrences a claim skips, for one history entry.
type skipped struct {
	n             int
	over          bool
	first, last   time.Time
	reasons       []string
	reasonCounted map[string]int
}

func (s *skipped) add(first, last time.Time, n int, over bool, reason string) {
	if s.n == 0 {
		s.first = first
	}
	s.n += n
	s.over = s.over || over
	s.last = last
	if s.reasonCounted == nil {
		s.reasonCounted = map[string]int{}
	}
	if _, ok := s.reasonCounted[reason]; !ok {
		s.reasons = append(s.reasons, reason)
	}
	s.reasonCounted[reason] += n
}

// entry is the Skipped history entry: how many, from when to when and why. Its expected time
// is the first skipped occurrence.
func (s *skipped) entry(now time.Time) *job.HistoryEntry {
	if s.n == 0 {
		return nil
	}
	count := fmt.Sprint(s.n)
	if s.over {
		count = "more than " + count
	}
	var why []string
	for _, r := range s.reasons {
		why = append(why, fmt.Sprintf("%d %s", s.reasonCounted[r], r))
	}
	return &job.HistoryEntry{
		StartTime: now.UTC(), EndTime: now.UTC(), ExpectedExecutionTime: s.first,
		ActionName: job.ActionNameMain, Status: job.ExecutionSkipped,
		Message: fmt.Sprintf("skipped %s missed occurrence(s) from %s to %s: %s", count,
			s.first.UTC().Format(time.RFC3339Nano), s.last.UTC().Format(time.RFC3339Nano), strings.Join(why, "; ")),
	}
}
