package recurrence_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/recurrence"
)

// rule is a case worked out by hand from docs/recurrence.md: the executions in order and, when the
// list is complete, why the series ends.
type rule struct {
	name, now, start, rec string
	want                  []string          // RFC 3339 UTC
	end                   recurrence.Reason // NotDone: want is only the beginning
}

// check runs the case through the engine, and through the oracle as a check on the oracle.
func (r rule) check(t *testing.T) {
	t.Helper()
	s := compile(t, r.now, r.start, r.rec)
	var got []string
	var occ recurrence.Occurrence
	if !returns(func() {
		for occ = s.First(); !occ.Done && len(got) < len(r.want); occ = s.Next(occ.Time, len(got)) {
			got = append(got, occ.Time.UTC().Format(time.RFC3339))
		}
	}) {
		t.Fatalf("now %s start %q %s: no answer within %v (after %v)", r.now, r.start, r.rec, hangLimit, got)
	}
	if !slices.Equal(got, r.want) {
		t.Errorf("now %s start %q %s\n got %v\nwant %v", r.now, r.start, r.rec, got, r.want)
	} else if r.end != recurrence.NotDone && (!occ.Done || occ.Reason != r.end) {
		t.Errorf("after %v: got %+v, want Done (%v)", got, occ, r.end)
	}
	r.checkOracle(t)
}

func (r rule) checkOracle(t *testing.T) {
	t.Helper()
	in := ruleInput(t, r.now, r.start, r.rec)
	o, err := newOracle(in.start, in.rec, in.now)
	if err != nil {
		t.Fatal(err)
	}
	until := in.now
	if n := len(r.want); n > 0 {
		until = mustTime(t, r.want[n-1])
	}
	v := o.executions(until, len(r.want))
	if got := strings.Fields(stamps(v.times)); !slices.Equal(got, r.want) {
		t.Errorf("oracle disagrees with the hand-worked case:\n got %v\nwant %v", got, r.want)
	}
}

// ruleInput decodes a case's texts the way compile does.
func ruleInput(t *testing.T, now, start, rec string) input {
	t.Helper()
	in := input{now: mustTime(t, now)}
	if start != "" {
		d, err := job.ParseDateTime(start)
		if err != nil {
			t.Fatal(err)
		}
		in.start = &d
	}
	if rec != "" {
		in.rec = new(job.Recurrence)
		if err := json.Unmarshal([]byte(rec), in.rec); err != nil {
			t.Fatal(err)
		}
	}
	return in
}

func runRules(t *testing.T, rules []rule) {
	for _, r := range rules {
		t.Run(r.name, r.check)
	}
}

// TestDSTRules is docs/recurrence.md §2: gaps, overlaps, two wall times on one instant, and clock
// frequencies through a repeated and a skipped hour.
func TestDSTRules(t *testing.T) {
	const chicago, london, lordHowe = `"timeZone":"America/Chicago"`, `"timeZone":"Europe/London"`, `"timeZone":"Australia/Lord_Howe"`
	runRules(t, []rule{
		{name: "gap, London", now: "2024-03-29T00:00Z", start: "2024-03-30T01:30", rec: `{"frequency":"Day",` + london + `}`,
			want: []string{"2024-03-30T01:30:00Z", "2024-03-31T01:30:00Z", "2024-04-01T00:30:00Z"}},
		{name: "overlap, London", now: "2024-10-25T00:00Z", start: "2024-10-26T01:30", rec: `{"frequency":"Day",` + london + `}`,
			want: []string{"2024-10-26T00:30:00Z", "2024-10-27T00:30:00Z", "2024-10-28T01:30:00Z"}},
		{name: "gap time and its image run once", now: "2019-03-08T00:00Z", start: "2019-03-09T00:00",
			rec:  `{"frequency":"Day","schedule":{"hours":[2,3],"minutes":[30]},` + chicago + `}`,
			want: []string{"2019-03-09T08:30:00Z", "2019-03-09T09:30:00Z", "2019-03-10T08:30:00Z", "2019-03-11T07:30:00Z", "2019-03-11T08:30:00Z"}},
		{name: "overlap runs each wall time once", now: "2019-11-01T00:00Z", start: "2019-11-02T00:00",
			rec:  `{"frequency":"Day","schedule":{"hours":[1],"minutes":[0,30]},` + chicago + `}`,
			want: []string{"2019-11-02T06:00:00Z", "2019-11-02T06:30:00Z", "2019-11-03T06:00:00Z", "2019-11-03T06:30:00Z", "2019-11-04T07:00:00Z", "2019-11-04T07:30:00Z"}},
		{name: "Santiago midnight gap, date-only start", now: "2022-09-01T00:00Z", start: "2022-09-10", rec: `{"frequency":"Day","timeZone":"America/Santiago"}`,
			want: []string{"2022-09-10T04:00:00Z", "2022-09-11T04:00:00Z", "2022-09-12T03:00:00Z"}},
		{name: "Hour through a repeated hour", now: "2019-11-01T00:00Z", start: "2019-11-03T00:00",
			rec:  `{"frequency":"Hour","schedule":{"minutes":[0]},` + chicago + `}`,
			want: []string{"2019-11-03T05:00:00Z", "2019-11-03T06:00:00Z", "2019-11-03T07:00:00Z", "2019-11-03T08:00:00Z"}},
		{name: "Hour through a skipped hour", now: "2019-03-08T00:00Z", start: "2019-03-10T00:00",
			rec:  `{"frequency":"Hour","schedule":{"hours":[1,2,3],"minutes":[0]},` + chicago + `}`,
			want: []string{"2019-03-10T07:00:00Z", "2019-03-10T08:00:00Z", "2019-03-11T06:00:00Z", "2019-03-11T07:00:00Z", "2019-03-11T08:00:00Z"}},
		{name: "Minute through a repeated hour", now: "2019-11-01T00:00Z", start: "2019-11-03T00:00",
			rec:  `{"frequency":"Minute","interval":30,"schedule":{"hours":[1]},` + chicago + `}`,
			want: []string{"2019-11-03T06:00:00Z", "2019-11-03T06:30:00Z", "2019-11-03T07:00:00Z", "2019-11-03T07:30:00Z", "2019-11-04T07:00:00Z", "2019-11-04T07:30:00Z"}},
		// 03:00 CDT is the first hour 3 on 2019-03-10: it exists and must run.
		{name: "Minute, hours filter after a skipped hour", now: "2019-03-08T00:00Z", start: "2019-03-10T00:00",
			rec:  `{"frequency":"Minute","interval":30,"schedule":{"hours":[3]},` + chicago + `}`,
			want: []string{"2019-03-10T08:00:00Z", "2019-03-10T08:30:00Z", "2019-03-11T08:00:00Z", "2019-03-11T08:30:00Z"}},
		{name: "Second, hours filter after a skipped hour", now: "2019-03-08T00:00Z", start: "2019-03-10T00:00",
			rec:  `{"frequency":"Second","interval":900,"schedule":{"hours":[3]},` + chicago + `}`,
			want: []string{"2019-03-10T08:00:00Z", "2019-03-10T08:15:00Z", "2019-03-10T08:30:00Z", "2019-03-10T08:45:00Z", "2019-03-11T08:00:00Z"}},
		{name: "Minute, hours filter, London spring forward", now: "2022-03-26T00:00Z", start: "2022-03-27T00:00Z",
			rec:  `{"frequency":"Minute","schedule":{"hours":[2]},` + london + `}`,
			want: []string{"2022-03-27T01:00:00Z", "2022-03-27T01:01:00Z", "2022-03-27T01:02:00Z"}},
		// Lord Howe falls back half an hour at 2023-04-01T15:00Z: 01:45 LHST (15:15Z) is a wall
		// minute 45 that exists and must run.
		{name: "Minute, minutes filter, Lord Howe fall back", now: "2023-04-01T00:00Z", start: "2023-04-01T14:50Z",
			rec:  `{"frequency":"Minute","schedule":{"minutes":[45]},` + lordHowe + `}`,
			want: []string{"2023-04-01T15:15:00Z", "2023-04-01T16:15:00Z", "2023-04-01T17:15:00Z"}},
		{name: "Lord Howe half-hour gap, Day", now: "2023-09-01T00:00Z", start: "2023-09-29T02:15", rec: `{"frequency":"Day",` + lordHowe + `}`,
			want: []string{"2023-09-28T15:45:00Z", "2023-09-29T15:45:00Z", "2023-09-30T15:45:00Z", "2023-10-01T15:15:00Z"}},
		{name: "Lord Howe half-hour overlap, Day", now: "2024-04-01T00:00Z", start: "2024-04-05T01:45", rec: `{"frequency":"Day",` + lordHowe + `}`,
			want: []string{"2024-04-04T14:45:00Z", "2024-04-05T14:45:00Z", "2024-04-06T14:45:00Z", "2024-04-07T15:15:00Z"}},
		{name: "Lord Howe, Hour with minutes, wall minute moves", now: "2024-04-01T00:00Z", start: "2024-04-07T00:00",
			rec:  `{"frequency":"Hour","schedule":{"minutes":[0]},` + lordHowe + `}`,
			want: []string{"2024-04-06T13:00:00Z", "2024-04-06T14:00:00Z", "2024-04-06T15:30:00Z", "2024-04-06T16:30:00Z"}},
		// §5: without a schedule "second, minute and hour add fixed durations".
		{name: "Lord Howe, Hour without schedule adds fixed hours", now: "2024-04-01T00:00Z", start: "2024-04-06T14:10Z",
			rec:  `{"frequency":"Hour",` + lordHowe + `}`,
			want: []string{"2024-04-06T14:10:00Z", "2024-04-06T15:10:00Z", "2024-04-06T16:10:00Z"}},
		// Without explicit minutes the hours only filter the fixed-hour series (see clockMatches).
		{name: "Lord Howe, Hour with hours only adds fixed hours", now: "2024-04-01T00:00Z", start: "2024-04-06T14:10Z",
			rec:  `{"frequency":"Hour","schedule":{"hours":[1,2,3]},` + lordHowe + `}`,
			want: []string{"2024-04-06T14:10:00Z", "2024-04-06T15:10:00Z", "2024-04-06T16:10:00Z", "2024-04-06T17:10:00Z", "2024-04-07T15:10:00Z"}},
		{name: "Kolkata, Hour interval 2 with minutes", now: "2023-12-31T00:00Z", start: "2024-01-01T00:10",
			rec:  `{"frequency":"Hour","interval":2,"schedule":{"minutes":[0,45]},"timeZone":"Asia/Kolkata"}`,
			want: []string{"2023-12-31T19:15:00Z", "2023-12-31T20:30:00Z", "2023-12-31T21:15:00Z"}},
	})
}

// TestApiaSkippedDay: Samoa went from 2011-12-29T23:59:59-10:00 to 2011-12-31T00:00+14:00. A
// wall time on the 30th runs with the offset before the change, which is the instant of the
// same wall time on the 31st: one execution.
func TestApiaSkippedDay(t *testing.T) {
	const apia = `"timeZone":"Pacific/Apia"`
	runRules(t, []rule{
		{name: "Day", now: "2011-12-01T00:00Z", start: "2011-12-28T10:00", rec: `{"frequency":"Day",` + apia + `}`,
			want: []string{"2011-12-28T20:00:00Z", "2011-12-29T20:00:00Z", "2011-12-30T20:00:00Z", "2011-12-31T20:00:00Z"}},
		{name: "Week on Friday the 30th", now: "2011-12-01T00:00Z", start: "2011-12-23T10:00",
			rec:  `{"frequency":"Week","schedule":{"weekDays":["Friday"]},` + apia + `}`,
			want: []string{"2011-12-23T20:00:00Z", "2011-12-30T20:00:00Z", "2012-01-05T20:00:00Z"}},
		{name: "Month on the 30th", now: "2011-11-01T00:00Z", start: "2011-11-30T10:00", rec: `{"frequency":"Month",` + apia + `}`,
			want: []string{"2011-11-30T20:00:00Z", "2011-12-30T20:00:00Z", "2012-01-29T20:00:00Z"}},
		{name: "Minute, hours filter over the skipped day", now: "2011-12-01T00:00Z", start: "2011-12-29T00:00",
			rec:  `{"frequency":"Minute","interval":60,"schedule":{"hours":[10]},` + apia + `}`,
			want: []string{"2011-12-29T20:00:00Z", "2011-12-30T20:00:00Z", "2011-12-31T20:00:00Z"}},
	})
}

// TestMonthEndsAndLeapYears: days a month lacks are skipped, never moved (§5, §6).
func TestMonthEndsAndLeapYears(t *testing.T) {
	const now, start = "2023-12-31T00:00Z", "2024-01-01T09:00Z"
	month := func(sched string) string { return `{"frequency":"Month","schedule":{` + sched + `}}` }
	runRules(t, []rule{
		{name: "31st", now: now, start: start, rec: month(`"monthDays":[31]`),
			want: []string{"2024-01-31T09:00:00Z", "2024-03-31T09:00:00Z", "2024-05-31T09:00:00Z", "2024-07-31T09:00:00Z", "2024-08-31T09:00:00Z"}},
		{name: "last day", now: now, start: start, rec: month(`"monthDays":[-1]`),
			want: []string{"2024-01-31T09:00:00Z", "2024-02-29T09:00:00Z", "2024-03-31T09:00:00Z", "2024-04-30T09:00:00Z"}},
		{name: "-31 is the 1st of 31-day months", now: now, start: start, rec: month(`"monthDays":[-31]`),
			want: []string{"2024-01-01T09:00:00Z", "2024-03-01T09:00:00Z", "2024-05-01T09:00:00Z", "2024-07-01T09:00:00Z", "2024-08-01T09:00:00Z"}},
		{name: "30th skips February", now: now, start: start, rec: month(`"monthDays":[30]`),
			want: []string{"2024-01-30T09:00:00Z", "2024-03-30T09:00:00Z"}},
		{name: "fifth Friday", now: now, start: start, rec: month(`"monthlyOccurrences":[{"day":"Friday","occurrence":5}]`),
			want: []string{"2024-03-29T09:00:00Z", "2024-05-31T09:00:00Z"}},
		{name: "last Friday", now: now, start: start, rec: month(`"monthlyOccurrences":[{"day":"Friday","occurrence":-1}]`),
			want: []string{"2024-01-26T09:00:00Z", "2024-02-23T09:00:00Z", "2024-03-29T09:00:00Z"}},
		{name: "every Sunday", now: now, start: start, rec: month(`"monthlyOccurrences":[{"day":"Sunday"}]`),
			want: []string{"2024-01-07T09:00:00Z", "2024-01-14T09:00:00Z", "2024-01-21T09:00:00Z", "2024-01-28T09:00:00Z", "2024-02-04T09:00:00Z"}},
		{name: "Month, the 29th of February", now: now, start: "2023-01-01T06:00Z", rec: month(`"monthDays":[29],"months":[2]`),
			want: []string{"2024-02-29T06:00:00Z", "2028-02-29T06:00:00Z"}},
		{name: "Year on 29 February", now: now, start: "2024-02-29T12:00Z", rec: `{"frequency":"Year"}`,
			want: []string{"2024-02-29T12:00:00Z", "2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"}},
		{name: "Year on 29 February over 2100", now: "2096-01-01T00:00Z", start: "2096-02-29T00:00Z", rec: `{"frequency":"Year"}`,
			want: []string{"2096-02-29T00:00:00Z", "2104-02-29T00:00:00Z"}},
		{name: "Year, monthDays 29 in months 2", now: now, start: "2021-06-01T06:00Z",
			rec:  `{"frequency":"Year","schedule":{"months":[2],"monthDays":[29]}}`,
			want: []string{"2024-02-29T06:00:00Z", "2028-02-29T06:00:00Z"}},
	})
}

// TestWeekAndHorizon: weeks start on Monday (§3, §4); a search finding nothing in 50 years ends
// the series (§7).
func TestWeekAndHorizon(t *testing.T) {
	runRules(t, []rule{
		{name: "biweekly from a Sunday: that Sunday ends its Monday week", now: "2023-12-31T00:00Z", start: "2024-01-07T09:00Z",
			rec:  `{"frequency":"Week","interval":2,"schedule":{"weekDays":["Monday","Sunday"]}}`,
			want: []string{"2024-01-07T09:00:00Z", "2024-01-15T09:00:00Z", "2024-01-21T09:00:00Z", "2024-01-29T09:00:00Z", "2024-02-04T09:00:00Z"}},
		{name: "biweekly, no schedule, from a Sunday", now: "2023-12-31T00:00Z", start: "2024-01-07T09:00Z", rec: `{"frequency":"Week","interval":2}`,
			want: []string{"2024-01-07T09:00:00Z", "2024-01-21T09:00:00Z", "2024-02-04T09:00:00Z"}},
		{name: "Month interval 2 from March, months [4]", now: "2024-01-01T00:00Z", start: "2024-03-01T00:00Z",
			rec: `{"frequency":"Month","interval":2,"schedule":{"months":[4]}}`, end: recurrence.NoMatch},
		{name: "Month interval 2 from April, months [4]", now: "2024-01-01T00:00Z", start: "2024-04-10T00:00Z",
			rec:  `{"frequency":"Month","interval":2,"schedule":{"months":[4]}}`,
			want: []string{"2024-04-10T00:00:00Z", "2025-04-10T00:00:00Z"}},
		{name: "Year, 30 February", now: "2024-01-01T00:00Z", start: "2024-01-01T00:00Z",
			rec: `{"frequency":"Year","schedule":{"months":[2],"monthDays":[30]}}`, end: recurrence.NoMatch},
		{name: "no startTime, never matching: immediate, then Done", now: "2024-03-15T10:00:00Z",
			rec:  `{"frequency":"Month","interval":2,"schedule":{"months":[4]}}`,
			want: []string{"2024-03-15T10:00:00Z"}, end: recurrence.NoMatch},
	})
}

// TestEnds: count, endTime and one-time jobs (§5, §7).
func TestEnds(t *testing.T) {
	runRules(t, []rule{
		{name: "count before endTime", now: "2024-01-01T00:00Z", start: "2024-01-01T00:00Z", rec: `{"frequency":"Hour","count":2,"endTime":"2024-02-01T00:00Z"}`,
			want: []string{"2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z"}, end: recurrence.CountMet},
		{name: "endTime before count, exactly on a time", now: "2024-01-01T00:00Z", start: "2024-01-01T00:00Z", rec: `{"frequency":"Hour","count":5,"endTime":"2024-01-01T02:00Z"}`,
			want: []string{"2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z", "2024-01-01T02:00:00Z"}, end: recurrence.EndTime},
		{name: "endTime in the past, with startTime", now: "2024-01-10T00:00Z", start: "2024-01-01T00:00Z", rec: `{"frequency":"Day","endTime":"2024-01-05T00:00Z"}`,
			end: recurrence.EndTime},
		{name: "endTime in the past, no startTime: not even the immediate run", now: "2024-01-10T00:00Z", rec: `{"frequency":"Day","endTime":"2024-01-05T00:00Z"}`,
			end: recurrence.EndTime},
		{name: "endTime equal to now, no startTime", now: "2024-01-10T00:00Z", rec: `{"frequency":"Day","endTime":"2024-01-10T00:00Z"}`,
			want: []string{"2024-01-10T00:00:00Z"}, end: recurrence.EndTime},
		{name: "count 1, no startTime", now: "2024-01-10T08:00:00Z", rec: `{"frequency":"Minute","count":1}`,
			want: []string{"2024-01-10T08:00:00Z"}, end: recurrence.CountMet},
		{name: "date-only endTime in the zone", now: "2023-12-01T00:00Z", start: "2024-01-01", rec: `{"frequency":"Day","endTime":"2024-01-03","timeZone":"Asia/Kolkata"}`,
			want: []string{"2023-12-31T18:30:00Z", "2024-01-01T18:30:00Z", "2024-01-02T18:30:00Z"}, end: recurrence.EndTime},
		{name: "one-time, future start", now: "2024-01-01T00:00Z", start: "2024-02-01T10:00Z",
			want: []string{"2024-02-01T10:00:00Z"}, end: recurrence.OneTime},
		{name: "one-time, no offset is UTC", now: "2024-01-01T00:00Z", start: "2024-02-01T10:00",
			want: []string{"2024-02-01T10:00:00Z"}, end: recurrence.OneTime},
		{name: "one-time, no start", now: "2024-01-01T00:00:07Z",
			want: []string{"2024-01-01T00:00:07Z"}, end: recurrence.OneTime},
	})
}

// TestLastDayOfLeapYearPastTzTable: from 2038 on, zones follow their TZ rule string, and Go's
// Time.ZoneBounds reports an end before the instant on the last UTC day of a leap year
// (golang/go#81583; 2040-12-31T00:00Z–2041-01-01T00:00Z for America/Chicago). A search must
// neither loop there nor misplace a time.
func TestLastDayOfLeapYearPastTzTable(t *testing.T) {
	const chicago = `"timeZone":"America/Chicago"`
	runRules(t, []rule{
		{name: "Minute, hours filter", now: "2040-12-01T00:00Z", start: "2040-12-30T12:00",
			rec:  `{"frequency":"Minute","schedule":{"hours":[5]},` + chicago + `}`,
			want: []string{"2040-12-31T11:00:00Z", "2040-12-31T11:01:00Z"}},
		{name: "Second, minutes filter", now: "2040-12-01T00:00Z", start: "2040-12-30T18:00",
			rec:  `{"frequency":"Second","interval":30,"schedule":{"minutes":[7]},` + chicago + `}`,
			want: []string{"2040-12-31T00:07:00Z", "2040-12-31T00:07:30Z", "2040-12-31T01:07:00Z"}},
		{name: "Hour, minutes", now: "2040-12-01T00:00Z", start: "2040-12-30T17:00",
			rec:  `{"frequency":"Hour","interval":5,"schedule":{"minutes":[15]},` + chicago + `}`,
			want: []string{"2040-12-30T23:15:00Z", "2040-12-31T04:15:00Z", "2040-12-31T09:15:00Z"}},
		{name: "Day", now: "2040-12-01T00:00Z", start: "2040-12-29T20:00", rec: `{"frequency":"Day",` + chicago + `}`,
			want: []string{"2040-12-30T02:00:00Z", "2040-12-31T02:00:00Z", "2041-01-01T02:00:00Z", "2041-01-02T02:00:00Z"}},
		{name: "Minute, never matching: the 50-year search crosses it", now: "2014-02-06T18:41:29Z", start: "2014-02-06T18:41:00",
			rec: `{"frequency":"Minute","interval":63,"schedule":{"minutes":[0,16]},"timeZone":"America/Santiago"}`, end: recurrence.NoMatch},
	})
}
