package dispatch

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/jobschema"
)

var c0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// compiledJob is a job every second from c0 (with the recurrence's extra members), read at its
// first occurrence.
func compiledJob(t *testing.T, extra string) (*compiled, *store.Job) {
	t.Helper()
	d, err := jobschema.Decode([]byte(`{"startTime":"2026-03-01T12:00:00Z","action":{"type":"Http","request":{"uri":"http://x/","method":"GET"}},
		"recurrence":{"frequency":"Second"` + extra + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	blob, err := jobs.EncodeBlob(d.Properties)
	if err != nil {
		t.Fatal(err)
	}
	rec := &store.Job{Collection: "c", Name: "j", Definition: blob, Version: 1, Accepted: c0.Add(-time.Minute), Next: c0}
	e, err := compileEntry(rec)
	if err != nil {
		t.Fatal(err)
	}
	return e, rec
}

func secs(ts []time.Time) string {
	var out []string
	for _, t := range ts {
		out = append(out, fmt.Sprint(int(t.Sub(c0)/time.Second)))
	}
	return strings.Join(out, " ")
}

// Occurrences 0–9 s are due at 9.5 s; no planner ran between 2 s and 6.5 s.
func TestPlan(t *testing.T) {
	outage := []store.Outage{{From: c0.Add(1500 * time.Millisecond), To: c0.Add(6500 * time.Millisecond)}}
	now := c0.Add(9500 * time.Millisecond)
	for _, c := range []struct {
		name, extra string
		rules       rules
		fire        string
		skipped     []string // each entry's message start
		next        time.Duration
		paced       bool
	}{
		{name: "Latest: the outage's latest fires, every other occurrence too", rules: rules{window: time.Hour, burst: 100, outages: outage},
			fire: "0 1 6 7 8 9", skipped: []string{"skipped 4 missed occurrence(s) from 2026-03-01T12:00:02Z to 2026-03-01T12:00:05Z: 4 no planner ran"},
			next: 10 * time.Second},
		{name: "All: everything fires", rules: rules{window: time.Hour, policy: job.CatchUpAll, burst: 100, outages: outage},
			fire: "0 1 2 3 4 5 6 7 8 9", next: 10 * time.Second},
		{name: "the job's own policy", extra: `,"catchUpPolicy":"All"`, rules: rules{window: time.Hour, burst: 100, outages: outage},
			fire: "0 1 2 3 4 5 6 7 8 9", next: 10 * time.Second},
		{name: "no outage: everything fires", rules: rules{window: time.Hour, burst: 100},
			fire: "0 1 2 3 4 5 6 7 8 9", next: 10 * time.Second},
		{name: "the window: the first occurrences are too late", rules: rules{window: 5 * time.Second, burst: 100},
			fire: "5 6 7 8 9", skipped: []string{"skipped 5 missed occurrence(s) from 2026-03-01T12:00:00Z to 2026-03-01T12:00:04Z: 5 more than the catch-up window (5s) late"},
			next: 10 * time.Second},
		{name: "a burst stops at the first occurrence left for later", rules: rules{window: time.Hour, burst: 3, pace: time.Second, outages: outage},
			fire: "0 1 6", skipped: []string{"skipped 4 missed occurrence(s) from 2026-03-01T12:00:02Z to 2026-03-01T12:00:05Z"},
			next: 7 * time.Second, paced: true},
		{name: "the count ends the series", extra: `,"count":4`, rules: rules{window: time.Hour, burst: 100, outages: outage},
			fire: "0 1 6 7", skipped: []string{"skipped 4 missed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, rec := compiledJob(t, c.extra)
			f := plan(e, rec, now, c.rules)
			if got := secs(f.fire); got != c.fire {
				t.Errorf("fires %q, want %q", got, c.fire)
			}
			if len(f.skipped) != len(c.skipped) {
				t.Fatalf("skipped %+v, want %d entries", f.skipped, len(c.skipped))
			}
			for i, want := range c.skipped {
				if !strings.HasPrefix(f.skipped[i].Message, want) {
					t.Errorf("skipped entry %q, want it to start %q", f.skipped[i].Message, want)
				}
			}
			if want := c0.Add(c.next); c.next == 0 && !f.next.IsZero() || c.next != 0 && !f.next.Equal(want) {
				t.Errorf("next %v, want %v", f.next, c.next)
			}
			if paced := !f.dueAt.IsZero(); paced != c.paced || paced && !f.dueAt.Equal(now.Add(time.Second)) {
				t.Errorf("due again at %v, paced %v", f.dueAt, c.paced)
			}
			if f.fired != len(f.fire) {
				t.Errorf("fired %d, want %d", f.fired, len(f.fire))
			}
		})
	}
}
