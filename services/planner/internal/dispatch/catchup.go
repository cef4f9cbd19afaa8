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
	fire    []time.Time        // occurrences to publish, in order
	fired   int                // the job's executions since acceptance, after these
	next    time.Time          // the job's next time afterwards; zero when the series is over
	dueAt   time.Time          // when it is due again if sooner than next would say (a paced burst)
	skipped []job.HistoryEntry // what did not fire and why: one entry per run of consecutive occurrences
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
// did not decide. Each Skipped entry covers a run of consecutive occurrences, from its
// expected time to the last one its message names, so a reader can tell exactly which.
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
			f.skipped = skip.entries(now)
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
		skip.end()
		if e.sched.CountMet(f.fired) {
			f.skipped = skip.entries(now) // recurrence.count is used up: the series is over
			return f
		}
		if len(f.fire) == r.burst {
			// More to fire than one claim may: the rest come in the next claims, pace apart.
			f.next, f.dueAt, f.skipped = o, now.Add(r.pace), skip.entries(now)
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
	f.skipped = skip.entries(now)
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

// skipped gathers the occurrences a claim skips, in runs of consecutive occurrences.
type skipped struct {
	runs []run
	open bool // the last run may grow
}

// run is consecutive skipped occurrences, with how many skipped for each reason.
type run struct {
	n           int
	over        bool
	first, last time.Time
	reasons     []string
	counts      map[string]int
}

func (s *skipped) add(first, last time.Time, n int, over bool, reason string) {
	if !s.open {
		s.runs = append(s.runs, run{first: first, counts: map[string]int{}})
		s.open = true
	}
	r := &s.runs[len(s.runs)-1]
	r.n += n
	r.over = r.over || over
	r.last = last
	if _, ok := r.counts[reason]; !ok {
		r.reasons = append(r.reasons, reason)
	}
	r.counts[reason] += n
}

// end closes the run: the next skipped occurrence starts another.
func (s *skipped) end() { s.open = false }

// entries are the Skipped history entries, one per run: how many, from when to when and why.
// An entry's expected time is the first occurrence of its run.
func (s *skipped) entries(now time.Time) []job.HistoryEntry {
	var out []job.HistoryEntry
	for _, r := range s.runs {
		count := fmt.Sprint(r.n)
		if r.over {
			count = "more than " + count
		}
		var why []string
		for _, reason := range r.reasons {
			why = append(why, fmt.Sprintf("%d %s", r.counts[reason], reason))
		}
		out = append(out, job.HistoryEntry{
			StartTime: now.UTC(), EndTime: now.UTC(), ExpectedExecutionTime: r.first,
			ActionName: job.ActionNameMain, Status: job.ExecutionSkipped,
			Message: fmt.Sprintf("skipped %s missed occurrence(s) from %s to %s: %s", count,
				r.first.UTC().Format(time.RFC3339Nano), r.last.UTC().Format(time.RFC3339Nano), strings.Join(why, "; ")),
		})
	}
	return out
}
