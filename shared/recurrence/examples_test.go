package recurrence_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/recurrence"
)

// compile builds a Schedule from texts: start "" means no startTime, rec "" no recurrence.
func compile(t testing.TB, now, start, rec string) *recurrence.Schedule {
	t.Helper()
	var st *job.DateTime
	if start != "" {
		d, err := job.ParseDateTime(start)
		if err != nil {
			t.Fatalf("start %q: %v", start, err)
		}
		st = &d
	}
	var r *job.Recurrence
	if rec != "" {
		r = new(job.Recurrence)
		if err := json.Unmarshal([]byte(rec), r); err != nil {
			t.Fatalf("recurrence %s: %v", rec, err)
		}
	}
	s, err := recurrence.Compile(st, r, mustTime(t, now))
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return s
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	d, err := job.ParseDateTime(s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return d.UTC()
}

func formatAll(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.UTC().Format(time.RFC3339)
	}
	return out
}

type example struct {
	name, now, start, rec string
	want                  []string // expected executions, RFC 3339 UTC; the list is complete when done is set
	done                  bool     // the series ends after want
}

func (e example) run(t *testing.T) {
	t.Helper()
	s := compile(t, e.now, e.start, e.rec)
	n := len(e.want)
	if e.done {
		n++
	}
	got := formatAll(s.Preview(n))
	if strings.Join(got, " ") != strings.Join(e.want, " ") {
		t.Errorf("now %s start %q %s\n got %v\nwant %v", e.now, e.start, e.rec, got, e.want)
	}
}

// TestWorkedExamples is docs/recurrence.md §9, row by row.
func TestWorkedExamples(t *testing.T) {
	const mins = `[0,10,20,30,40,50]`
	for _, e := range []example{
		{name: "past start, no schedule", now: "2015-04-08T13:00Z", start: "2015-04-07T14:00Z", rec: `{"frequency":"Day","interval":2}`,
			want: []string{"2015-04-09T14:00:00Z", "2015-04-11T14:00:00Z", "2015-04-13T14:00:00Z"}},
		{name: "same, older start", now: "2015-04-08T13:00Z", start: "2015-04-01T14:00Z", rec: `{"frequency":"Day","interval":2}`,
			want: []string{"2015-04-09T14:00:00Z", "2015-04-11T14:00:00Z"}},
		{name: "weekly, no schedule", now: "2016-03-30T19:36:33Z", start: "2015-07-13T00:00Z", rec: `{"frequency":"Week"}`,
			want: []string{"2016-04-04T00:00:00Z", "2016-04-11T00:00:00Z"}},
		{name: "monthDays", now: "2016-03-30T19:37:03Z", start: "2015-07-13T00:00Z",
			rec:  `{"frequency":"Month","schedule":{"hours":[5,10,15,20],"minutes":` + mins + `,"monthDays":[15,30]}}`,
			want: []string{"2016-03-30T20:00:00Z", "2016-03-30T20:10:00Z", "2016-03-30T20:20:00Z"}},
		{name: "monthlyOccurrences", now: "2016-03-30T19:35:16Z", start: "2015-07-13T00:00Z",
			rec:  `{"frequency":"Month","schedule":{"hours":[5,10,15,20],"minutes":` + mins + `,"monthlyOccurrences":[{"day":"Monday","occurrence":1},{"day":"Friday","occurrence":1}]}}`,
			want: []string{"2016-04-01T05:00:00Z", "2016-04-01T05:10:00Z"}},
		{name: "one-time, past start", now: "2016-03-30T20:40:35Z", start: "2015-07-13T00:00Z",
			want: []string{"2016-03-30T20:40:35Z"}, done: true},
		{name: "no start, schedule", now: "2016-03-30T20:40:35Z", rec: `{"frequency":"Day","schedule":{"hours":[5]}}`,
			want: []string{"2016-03-30T20:40:35Z", "2016-03-31T05:40:35Z", "2016-04-01T05:40:35Z"}},
		{name: "minutes only, Day", now: "2023-12-31T00:00Z", start: "2024-01-01T12:25Z", rec: `{"frequency":"Day","schedule":{"minutes":[0]}}`,
			want: []string{"2024-01-01T13:00:00Z", "2024-01-01T14:00:00Z", "2024-01-01T15:00:00Z"}},
		{name: "hours only, Day", now: "2023-12-31T00:00Z", start: "2024-01-01T12:25Z",
			rec:  `{"frequency":"Day","schedule":{"hours":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23]}}`,
			want: []string{"2024-01-01T12:25:00Z", "2024-01-01T13:25:00Z", "2024-01-01T14:25:00Z"}},
		{name: "biweekly", now: "2023-12-31T00:00Z", start: "2024-01-03T09:00Z", rec: `{"frequency":"Week","interval":2,"schedule":{"weekDays":["Sunday","Thursday"]}}`,
			want: []string{"2024-01-04T09:00:00Z", "2024-01-07T09:00:00Z", "2024-01-18T09:00:00Z", "2024-01-21T09:00:00Z"}},
		{name: "union of days", now: "2023-12-31T00:00Z", start: "2024-01-01T12:00Z",
			rec:  `{"frequency":"Month","schedule":{"hours":[8],"minutes":[0],"monthDays":[10],"monthlyOccurrences":[{"day":"Monday","occurrence":1}]}}`,
			want: []string{"2024-01-10T08:00:00Z", "2024-02-05T08:00:00Z", "2024-02-10T08:00:00Z", "2024-03-04T08:00:00Z"}},
		{name: "31st, no schedule", now: "2023-12-31T00:00Z", start: "2024-01-31T09:00Z", rec: `{"frequency":"Month"}`,
			want: []string{"2024-01-31T09:00:00Z", "2024-03-31T09:00:00Z", "2024-05-31T09:00:00Z"}},
		{name: "count from acceptance", now: "2024-01-01T11:00Z", start: "2020-01-01T10:00Z", rec: `{"frequency":"Day","count":3}`,
			want: []string{"2024-01-02T10:00:00Z", "2024-01-03T10:00:00Z", "2024-01-04T10:00:00Z"}, done: true},
		{name: "count and endTime", now: "2023-12-31T00:00Z", start: "2024-01-01T12:00Z", rec: `{"frequency":"Day","count":5,"endTime":"2024-01-03T12:00Z"}`,
			want: []string{"2024-01-01T12:00:00Z", "2024-01-02T12:00:00Z", "2024-01-03T12:00:00Z"}, done: true},
		{name: "DST gap", now: "2019-03-08T00:00Z", start: "2019-03-09T02:30", rec: `{"frequency":"Day","timeZone":"America/Chicago"}`,
			want: []string{"2019-03-09T08:30:00Z", "2019-03-10T08:30:00Z", "2019-03-11T07:30:00Z"}},
		{name: "DST overlap", now: "2019-11-01T00:00Z", start: "2019-11-02T01:30", rec: `{"frequency":"Day","timeZone":"America/Chicago"}`,
			want: []string{"2019-11-02T06:30:00Z", "2019-11-03T06:30:00Z", "2019-11-04T07:30:00Z"}},
		{name: "start inside the gap", now: "2019-03-01T00:00Z", start: "2019-03-10T02:30", rec: `{"frequency":"Day","timeZone":"America/Chicago"}`,
			want: []string{"2019-03-10T08:30:00Z", "2019-03-11T07:30:00Z", "2019-03-12T07:30:00Z"}},
		{name: "Hour in a zone", now: "2023-12-31T00:00Z", start: "2024-01-01T00:00", rec: `{"frequency":"Hour","timeZone":"Asia/Kolkata","schedule":{"minutes":[0]}}`,
			want: []string{"2023-12-31T18:30:00Z", "2023-12-31T19:30:00Z", "2023-12-31T20:30:00Z"}},
		{name: "weekly, future start, zone", now: "2020-09-04T17:00Z", start: "2020-09-18T08:00",
			rec:  `{"frequency":"Week","timeZone":"Pacific Standard Time","schedule":{"weekDays":["Monday"],"hours":[10,12,14],"minutes":[30]}}`,
			want: []string{"2020-09-21T17:30:00Z", "2020-09-21T19:30:00Z", "2020-09-21T21:30:00Z", "2020-09-28T17:30:00Z"}},
	} {
		t.Run(e.name, e.run)
	}
}

// TestFoundInReview holds the cases a review found wrong; each failed before its fix.
func TestFoundInReview(t *testing.T) {
	for _, e := range []example{
		// An explicit offset naming the second instance of a repeated hour is A's instant:
		// the series starts there, not a day later (§4).
		{name: "offset names the second 01:30", now: "2019-11-01T00:00Z", start: "2019-11-03T01:30:00-06:00",
			rec:  `{"frequency":"Day","timeZone":"America/Chicago"}`,
			want: []string{"2019-11-03T07:30:00Z", "2019-11-04T07:30:00Z", "2019-11-05T07:30:00Z"}},
		// The first instance, given with its own offset, stays where it was.
		{name: "offset names the first 01:30", now: "2019-11-01T00:00Z", start: "2019-11-03T01:30:00-05:00",
			rec:  `{"frequency":"Day","timeZone":"America/Chicago"}`,
			want: []string{"2019-11-03T06:30:00Z", "2019-11-04T07:30:00Z"}},
		// A fraction of a second never lets the job fire before the instant asked for.
		{name: "fraction rounds up", now: "2026-01-01T00:00Z", start: "2026-01-01T09:00:00.250Z",
			rec: `{"frequency":"Day"}`, want: []string{"2026-01-01T09:00:01Z", "2026-01-02T09:00:01Z"}},
		{name: "fraction, one-time", now: "2026-01-01T00:00Z", start: "2026-01-01T09:00:00.001Z",
			want: []string{"2026-01-01T09:00:01Z"}, done: true},
		// A series ends before the year 10000, which RFC 3339 cannot write.
		{name: "series ends at the year 9999", now: "2026-01-01T00:00Z", start: "9999-12-31T23:59:00Z",
			rec: `{"frequency":"Second","interval":30}`, want: []string{"9999-12-31T23:59:00Z", "9999-12-31T23:59:30Z"}, done: true},
		{name: "start past the year 9999", now: "2026-01-01T00:00Z", start: "9999-12-31T23:30:00",
			rec: `{"frequency":"Day","timeZone":"Pacific Standard Time"}`, done: true},
	} {
		t.Run(e.name, e.run)
	}
}

// An immediate run is due at the acceptance instant to the millisecond, so the planner's fire
// lag of an on-time run is its publish alone.
func TestImmediateRunKeepsTheMillisecond(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 734_500_000, time.UTC)
	s, err := recurrence.Compile(nil, &job.Recurrence{Frequency: job.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.First().Time; !got.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("first run at %s, want %s", got.Format(time.RFC3339Nano), now.Truncate(time.Millisecond).Format(time.RFC3339Nano))
	}
	if got := s.Next(s.First().Time, 1).Time; !got.Equal(time.Date(2026, 1, 1, 12, 1, 0, 0, time.UTC)) {
		t.Fatalf("second run at %s", got)
	}
}
