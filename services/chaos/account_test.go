package chaos

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/shared/job"
)

// chaosJob is one job of the run: every `every` seconds from start to end.
type chaosJob struct {
	coll, name string
	every      int
	policy     string
	start, end time.Time
}

// putJobs creates the jobs through the planners' API, over 20 collections (so every partition
// has work), each firing every `every` seconds from start to end with its catch-up policy.
func (c *cluster) putJobs(groups []group, start, end time.Time) []chaosJob {
	c.t.Helper()
	const collections = 20
	for i := range collections {
		if err := c.call(fmt.Sprint("collections.put.c", i), map[string]any{"properties": map[string]any{}}, nil); err != nil {
			c.t.Fatal(err)
		}
	}
	var jobs []chaosJob
	for g, gr := range groups {
		for k := range gr.count {
			j := chaosJob{coll: fmt.Sprint("c", len(jobs)%collections), name: fmt.Sprintf("g%d-%d", g, k), every: gr.every,
				policy: gr.policy, start: start, end: end}
			rec := map[string]any{"frequency": "Second", "interval": gr.every, "endTime": end.Format(time.RFC3339)}
			if gr.policy != "" {
				rec["catchUpPolicy"] = gr.policy
			}
			def := map[string]any{"startTime": start.Format(time.RFC3339), "recurrence": rec,
				"action": map[string]any{"type": "Http", "request": map[string]any{"method": "POST", "uri": "http://" + c.target.addr + "/" + j.name}}}
			if err := c.call("jobs.put."+j.coll+"."+j.name, def, nil); err != nil {
				c.t.Fatal(err)
			}
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// occurrence is one execution a job's schedule calls for.
type occurrence struct {
	job        int
	at         time.Time
	tag        string      // the execution tag of its first delivery
	deliveries []time.Time // when the target received it, in order
	skipped    bool        // a Skipped history entry covers it
	completed  bool        // the history has a Completed main-action entry for it
	attempts   int         // main-action entries in the history: the attempts reported, and the deliveries lost
}

// report is the accounting of a run.
type report struct {
	jobs, expected, delivered, skipped, lost, both, early, skippedAlive int
	skippedWhy                                                          map[string]int
	duplicates                                                          map[string]int // by cause
	unknownDeliveries                                                   int
	lateness                                                            []time.Duration // of each occurrence's first delivery
	worstLiveLate                                                       time.Duration   // the worst of those due while a planner ran
	// worstLiveLateLed is worstLiveLate less the time the due stream or its workers' consumer
	// was seen without a leader between the occurrence's time and its delivery: JetStream's
	// elections, which the services wait out whatever they do. Only runs that watch the
	// leader (watchDueLeader) have any.
	worstLiveLateLed                                                 time.Duration
	worstLiveLateWhat                                                string        // which occurrence that was, and when it came
	leaderless                                                       time.Duration // all the time the due stream or its consumer was seen without a leader
	countMismatches, historyMissing, historyExtra, historyDuplicates int
	// lostAttempts counts the entries of deliveries that left no result (a worker killed or
	// cut off mid-delivery), and unshown the deliveries the target received beyond the
	// attempts its history shows.
	lostAttempts, unshown int
	examples              []string
}

var (
	skipRange  = regexp.MustCompile(`from (\S+) to (\S+):`)
	skipReason = regexp.MustCompile(`(\d+) (more than the catch-up window|no planner ran)`)
	lostEntry  = regexp.MustCompile(`^Delivery \d+ of this occurrence left no result`)
)

// occurrenceKey names a job's occurrence by the job and its time.
func occurrenceKey(job string, at time.Time) string {
	return job + " " + strconv.FormatInt(at.UnixMilli(), 10)
}

// account classifies every occurrence the schedules called for, and compares the history and
// counters with the deliveries.
func (c *cluster) account(jobs []chaosJob, end time.Time) *report {
	c.t.Helper()
	r := &report{jobs: len(jobs), skippedWhy: map[string]int{}, duplicates: map[string]int{},
		leaderless: c.timeline.leaderlessIn(time.Time{}, end)}
	var occs []*occurrence
	byTime := map[string]*occurrence{} // by job and expected time, as the target's headers say them
	byJob := make([]map[int64]*occurrence, len(jobs))
	for i, j := range jobs {
		byJob[i] = map[int64]*occurrence{}
		for at := j.start; !at.After(j.end); at = at.Add(time.Duration(j.every) * time.Second) {
			o := &occurrence{job: i, at: at}
			occs = append(occs, o)
			byTime[occurrenceKey(j.coll+"/"+j.name, at)] = o
			byJob[i][at.Unix()] = o
		}
	}
	for _, d := range c.target.all() {
		at, _ := time.Parse(time.RFC3339, d.expected)
		o := byTime[occurrenceKey(d.job, at)]
		switch {
		case o == nil:
			r.unknownDeliveries++
		case o.tag != "" && d.tag != o.tag: // every delivery of an occurrence carries its one tag
			r.unknownDeliveries++
			r.example("another execution tag for %s at %s: %s, then %s", d.job, d.expected, o.tag, d.tag)
		default:
			o.tag = d.tag
			o.deliveries = append(o.deliveries, d.at)
		}
	}
	for i, j := range jobs {
		c.history(r, j, byJob[i])
	}
	for _, o := range occs {
		r.expected++
		switch {
		case len(o.deliveries) > 0 && o.skipped:
			r.both++
			r.example("fired and skipped: %s at %s", jobs[o.job].name, o.at.Format(time.TimeOnly))
		case len(o.deliveries) > 0:
			r.delivered++
		case o.skipped:
			r.skipped++
			if c.timeline.plannerAlive(o.at) {
				r.skippedAlive++
				r.example("skipped while a planner ran: %s at %s", jobs[o.job].name, o.at.Format(time.TimeOnly))
			}
		default:
			r.lost++
			r.example("lost without a record: %s/%s at %s", jobs[o.job].coll, jobs[o.job].name, o.at.Format(time.TimeOnly))
		}
		if len(o.deliveries) == 0 {
			continue
		}
		late := o.deliveries[0].Sub(o.at)
		if late < 0 {
			r.early++
			r.example("early by %v: %s at %s", -late, jobs[o.job].name, o.at.Format(time.TimeOnly))
		}
		r.lateness = append(r.lateness, late)
		if c.timeline.plannerAlive(o.at) {
			r.worstLiveLate = max(r.worstLiveLate, late)
			if led := late - c.timeline.leaderlessIn(o.at, o.deliveries[0]); led > r.worstLiveLateLed {
				r.worstLiveLateLed = led
				r.worstLiveLateWhat = fmt.Sprintf("%s/%s due %s, delivered %s", jobs[o.job].coll, jobs[o.job].name,
					o.at.Format("15:04:05"), o.deliveries[0].Format("15:04:05.000"))
			}
		}
		if len(o.deliveries) > 1 {
			r.duplicates[c.cause(o)] += len(o.deliveries) - 1
		}
		if n := len(o.deliveries) - o.attempts; n > 0 {
			r.unshown += n
			r.example("delivered %d times, %d attempts in the history: %s at %s", len(o.deliveries), o.attempts, jobs[o.job].name, o.at.Format(time.TimeOnly))
		}
		if !o.completed {
			r.historyMissing++
			r.example("delivered but no Completed history entry: %s at %s", jobs[o.job].name, o.at.Format(time.TimeOnly))
		}
	}
	return r
}

// history reads a job's history and status and marks its occurrences.
func (c *cluster) history(r *report, j chaosJob, occs map[int64]*occurrence) {
	c.t.Helper()
	var entries []job.HistoryEntry
	var req any = map[string]int{"top": 1000}
	for {
		var page struct {
			Value    []job.HistoryEntry `json:"value"`
			NextLink json.RawMessage    `json:"nextLink"`
		}
		if err := c.call("jobs.history."+j.coll+"."+j.name, req, &page); err != nil {
			c.t.Fatal(err)
		}
		entries = append(entries, page.Value...)
		if len(page.NextLink) == 0 {
			break
		}
		req = page.NextLink // the next request, as the planner wrote it
	}
	seen := map[string]bool{}
	delivered := 0
	for _, o := range occs {
		if len(o.deliveries) > 0 {
			delivered++
		}
	}
	for _, e := range entries {
		if e.ActionName == job.ActionNameMain && e.Status != job.ExecutionSkipped {
			if o := occs[e.ExpectedExecutionTime.Unix()]; o != nil {
				o.attempts++
			}
		}
		if lostEntry.MatchString(e.Message) {
			r.lostAttempts++
		}
		key := fmt.Sprint(e.ExpectedExecutionTime.Unix(), e.ActionName, e.RetryCount, e.Status)
		if e.Status != job.ExecutionSkipped && seen[key] {
			r.historyDuplicates++
			r.example("two history entries for one attempt: %s %s", j.name, key)
		}
		seen[key] = true
		switch {
		case e.Status == job.ExecutionSkipped:
			m := skipRange.FindStringSubmatch(e.Message)
			if m == nil {
				r.example("unreadable Skipped entry of %s: %s", j.name, e.Message)
				continue
			}
			from, _ := time.Parse(time.RFC3339Nano, m[1])
			to, _ := time.Parse(time.RFC3339Nano, m[2])
			for at := from; !at.After(to); at = at.Add(time.Duration(j.every) * time.Second) {
				if o := occs[at.Unix()]; o != nil {
					o.skipped = true
				}
			}
			for _, why := range skipReason.FindAllStringSubmatch(e.Message, -1) {
				n, _ := strconv.Atoi(why[1])
				r.skippedWhy[why[2]] += n
			}
		case e.ActionName == job.ActionNameMain && e.Status == job.ExecutionCompleted:
			o := occs[e.ExpectedExecutionTime.Unix()]
			if o == nil || len(o.deliveries) == 0 {
				r.historyExtra++
				r.example("a Completed history entry for an occurrence the target never received: %s at %s", j.name, e.ExpectedExecutionTime)
				continue
			}
			o.completed = true
		}
	}
	var d job.Definition
	if err := c.call("jobs.get."+j.coll+"."+j.name, nil, &d); err != nil {
		c.t.Fatal(err)
	}
	if st := d.Properties.Status; st == nil || st.ExecutionCount != delivered {
		r.countMismatches++
		r.example("%s: executionCount %v, the target received %d occurrences", j.name, st, delivered)
	}
}

// cause says why an occurrence reached the target more than once, by what the harness did
// between its first delivery (less the AckWait) and its last.
func (c *cluster) cause(o *occurrence) string {
	kinds := c.timeline.near(o.deliveries[0].Add(-6*time.Second), o.deliveries[len(o.deliveries)-1])
	switch {
	case slices.Contains(kinds, workerKilled):
		return "a worker was killed mid-delivery: redelivered after the AckWait"
	case slices.Contains(kinds, workerHung):
		return "a worker's link to NATS hung mid-delivery: redelivered after the AckWait"
	case slices.Contains(kinds, natsRestart):
		return "the NATS server restarted: a result or acknowledgement was lost with its connection"
	case slices.Contains(kinds, redisRestart):
		return "Redis restarted: an advance lost from its append-only file"
	case slices.Contains(kinds, redisFailover):
		return "a Redis master was lost: an advance it had not replicated yet"
	case slices.Contains(kinds, natsLoss):
		return "a NATS server was lost: an acknowledgement lost with its connection"
	case slices.Contains(kinds, down):
		return "a planner was killed between publish and advance, and the duplicate window did not hold"
	}
	return "unexplained"
}

func (r *report) example(format string, args ...any) {
	if len(r.examples) < 20 {
		r.examples = append(r.examples, fmt.Sprintf(format, args...))
	}
}

func (r *report) percentile(p float64) time.Duration {
	if len(r.lateness) == 0 {
		return 0
	}
	l := slices.Clone(r.lateness)
	slices.Sort(l)
	return l[min(len(l)-1, int(float64(len(l))*p))]
}

// String is the report as `make chaos` prints it and docs/reliability.md records it.
func (r *report) String(name string) string {
	var b strings.Builder
	row := func(what string, v any) { fmt.Fprintf(&b, "| %s | %v |\n", what, v) }
	fmt.Fprintf(&b, "chaos run %q: %d jobs\n\n| measure | value |\n|---|---|\n", name, r.jobs)
	row("occurrences expected", r.expected)
	row("delivered", r.delivered)
	row("skipped (recorded Skipped)", r.skipped)
	for why, n := range r.skippedWhy {
		row("  skipped because "+why, n)
	}
	row("lost without a record (must be 0)", r.lost)
	row("fired and skipped (must be 0)", r.both)
	row("fired early (must be 0)", r.early)
	row("skipped while a planner was alive (must be 0)", r.skippedAlive)
	dups := 0
	for _, n := range r.duplicates {
		dups += n
	}
	row("duplicate deliveries", dups)
	for cause, n := range r.duplicates {
		row("  because "+cause, n)
	}
	row("deliveries of no expected occurrence (must be 0)", r.unknownDeliveries)
	row("lateness p50", r.percentile(0.50).Round(time.Millisecond))
	row("lateness p99", r.percentile(0.99).Round(time.Millisecond))
	row("lateness max", r.percentile(1).Round(time.Millisecond))
	row("lateness max while a planner ran", r.worstLiveLate.Round(time.Millisecond))
	if r.leaderless > 0 {
		row("  less the time the due stream or its consumer had no leader since the occurrence", r.worstLiveLateLed.Round(time.Millisecond))
		row("  the occurrence of that figure", r.worstLiveLateWhat)
		row("time the due stream or its consumer was seen without a leader, where the test watched it", r.leaderless.Round(time.Millisecond))
	}
	row("jobs whose executionCount differs from the target (must be 0)", r.countMismatches)
	row("delivered occurrences without a Completed history entry (must be 0)", r.historyMissing)
	row("Completed history entries of occurrences not delivered (must be 0)", r.historyExtra)
	row("two history entries for one attempt (must be 0)", r.historyDuplicates)
	row("deliveries that left no result, recorded as such", r.lostAttempts)
	row("deliveries the target received beyond the attempts the history shows", r.unshown)
	if len(r.examples) > 0 {
		b.WriteString("\nexamples:\n")
		for _, e := range r.examples {
			b.WriteString("  " + e + "\n")
		}
	}
	return b.String()
}

// liveLateBound is how late an occurrence due while a planner ran may be delivered: the lease
// of a killed planner (3 s) running out, a partition changing hands, a NATS or Redis restart
// on a loaded two-core machine.
const liveLateBound = 10 * time.Second

func (r *report) check(t *testing.T, lateBound time.Duration) {
	t.Helper()
	if r.expected == 0 || r.delivered == 0 {
		t.Fatalf("nothing to account for: %d expected, %d delivered", r.expected, r.delivered)
	}
	for _, c := range []struct {
		what string
		n    int
	}{
		{"lost without a record", r.lost}, {"fired and skipped", r.both}, {"fired early", r.early},
		{"skipped while a planner was alive", r.skippedAlive}, {"deliveries of no expected occurrence", r.unknownDeliveries},
		{"duplicates of no known cause", r.duplicates["unexplained"]},
		{"jobs whose executionCount differs from the target", r.countMismatches},
		{"delivered occurrences without a history entry", r.historyMissing},
		{"history entries of occurrences not delivered", r.historyExtra},
		{"deliveries the target received that show in no history entry", r.unshown},
		{"duplicate history entries", r.historyDuplicates},
	} {
		if c.n != 0 {
			t.Errorf("%s: %d", c.what, c.n)
		}
	}
	if r.worstLiveLateLed > lateBound {
		t.Errorf("an occurrence due while a planner ran was delivered %v late, %v less the time the due stream or its consumer had no leader (bound %v)",
			r.worstLiveLate, r.worstLiveLateLed, lateBound)
	}
}
