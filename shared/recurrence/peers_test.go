package recurrence_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/teambition/rrule-go"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/recurrence"
)

// The benchmarks of BenchmarkNext compare the engine with two peers on the same rules; this file
// holds those rules and TestPeersAgree, which checks that the three libraries give the same
// answers, so the benchmarks time equal work.

// peerNow is the acceptance instant of every compared schedule. It is fixed, not time.Now(), so
// that runs on different days do the same work; the year after it contains both DST changes of
// America/Chicago (2025-03-09 and 2025-11-02).
var peerNow = time.Date(2025, time.January, 15, 12, 0, 0, 0, time.UTC)

// peerRule is one rule written for each library. The start's date is chosen per benchmark
// (yesterday or 20 years ago); its wall-clock time is hour:minute:00 in the rule's zone.
type peerRule struct {
	name         string
	zone         string // IANA name; "" for UTC
	hour, minute int    // wall time of the start
	rec          string // resched recurrence, JSON
	rrule        rrule.ROption
	cron         string // "" when cron cannot express the rule
}

var peerRules = []peerRule{
	{
		name: "simple", hour: 12,
		rec:   `{"frequency":"Minute","interval":15}`,
		rrule: rrule.ROption{Freq: rrule.MINUTELY, Interval: 15},
		cron:  "*/15 * * * *", // the start is on a quarter hour, so the grids coincide
	},
	{
		name:  "weekly",
		rec:   `{"frequency":"Week","schedule":{"weekDays":["Monday","Wednesday","Friday"],"hours":[5,17],"minutes":[15]}}`,
		rrule: rrule.ROption{Freq: rrule.WEEKLY, Byweekday: []rrule.Weekday{rrule.MO, rrule.WE, rrule.FR}, Byhour: []int{5, 17}, Byminute: []int{15}},
		cron:  "15 5,17 * * 1,3,5",
	},
	{
		// cron has no "last Friday of the month" (and ORs day-of-month with day-of-week, so
		// not "first Friday" either): no cron variant.
		name:  "monthly",
		rec:   `{"frequency":"Month","schedule":{"monthlyOccurrences":[{"day":"Friday","occurrence":1},{"day":"Friday","occurrence":-1}],"hours":[5],"minutes":[15]}}`,
		rrule: rrule.ROption{Freq: rrule.MONTHLY, Byweekday: []rrule.Weekday{rrule.FR.Nth(1), rrule.FR.Nth(-1)}, Byhour: []int{5}, Byminute: []int{15}},
	},
	{
		name: "dst", zone: "America/Chicago", hour: 2, minute: 30,
		rec:   `{"frequency":"Day","timeZone":"America/Chicago"}`,
		rrule: rrule.ROption{Freq: rrule.DAILY},
		cron:  "CRON_TZ=America/Chicago 30 2 * * *",
	},
}

// peerStarts are the two starts each rule is measured with, as dates relative to peerNow.
var peerStarts = []struct {
	name        string
	years, days int
}{
	{name: "start=yesterday", days: -1},
	{name: "start=20y", years: -20, days: -1},
}

// peers is one rule compiled in each library for one start.
type peers struct {
	resched *recurrence.Schedule
	rrule   *rrule.RRule
	cron    cron.Schedule // nil when the rule has no cron form
}

// compilePeers builds the rule in the three libraries with the start `years` and `days` before
// peerNow's date.
func compilePeers(tb testing.TB, r peerRule, years, days int) peers {
	tb.Helper()
	loc := time.UTC
	if r.zone != "" {
		l, err := time.LoadLocation(r.zone)
		if err != nil {
			tb.Fatalf("zone %s: %v", r.zone, err)
		}
		loc = l
	}
	d := peerNow.AddDate(years, 0, days)
	start := job.DateTime{Year: d.Year(), Month: d.Month(), Day: d.Day(), Hour: r.hour, Minute: r.minute}
	// A UTC start is written with Z; a zoned one without offset, as wall time in the job's zone.
	start.HasOffset = r.zone == ""

	var rec job.Recurrence
	if err := json.Unmarshal([]byte(r.rec), &rec); err != nil {
		tb.Fatalf("%s: recurrence: %v", r.name, err)
	}
	var p peers
	var err error
	if p.resched, err = recurrence.Compile(&start, &rec, peerNow); err != nil {
		tb.Fatalf("%s: compile: %v", r.name, err)
	}
	opt := r.rrule
	opt.Dtstart = time.Date(d.Year(), d.Month(), d.Day(), r.hour, r.minute, 0, 0, loc)
	if p.rrule, err = rrule.NewRRule(opt); err != nil {
		tb.Fatalf("%s: rrule: %v", r.name, err)
	}
	if r.cron != "" {
		if p.cron, err = cron.ParseStandard(r.cron); err != nil {
			tb.Fatalf("%s: cron: %v", r.name, err)
		}
	}
	return p
}

// queryRing is the list of instants the benchmarks ask "what is next after this?" about: it
// walks forward from peerNow through the following year in steps that line up with no rule
// (8h33m17s), so consecutive questions have different answers and every weekday and time of
// day comes up. 1024 steps of 8h33m17s are 365 days and 128 s.
func queryRing() []time.Time {
	const step = 8*time.Hour + 33*time.Minute + 17*time.Second
	ring := make([]time.Time, 1024)
	for i := range ring {
		ring[i] = peerNow.Add(time.Duration(i) * step)
	}
	return ring
}

// dstQueries ask around the two DST changes of 2025 in America/Chicago. They leave out the
// spring-forward day itself, where the three libraries differ (TestPeersDSTGap): 2025-03-09T09:00Z
// is just after that day's 02:30 in every library, and 02:30 is not repeated in the fall (the
// repeated hour is 01:00–02:00), so all three agree there.
var dstQueries = []time.Time{
	time.Date(2025, time.March, 9, 9, 0, 0, 0, time.UTC),
	time.Date(2025, time.November, 1, 12, 0, 0, 0, time.UTC),
	time.Date(2025, time.November, 2, 6, 0, 0, 0, time.UTC),
}

// TestPeersAgree checks, for every rule and start, that resched, rrule-go and (where it can
// express the rule) cron return the same next three executions after a sample of the
// benchmark's query instants, and around the DST changes for the zoned rule. With the start 20
// years back only two instants are sampled: rrule-go walks 20 years of the series per question.
func TestPeersAgree(t *testing.T) {
	ring := queryRing()
	for _, r := range peerRules {
		for _, st := range peerStarts {
			t.Run(r.name+"/"+st.name, func(t *testing.T) {
				var queries []time.Time
				switch {
				case st.years == 0:
					for i := 0; i < len(ring); i += 128 {
						queries = append(queries, ring[i])
					}
				case testing.Short():
					t.Skip("rrule-go iterates 20 years per query")
				default:
					queries = []time.Time{ring[0], ring[len(ring)-1]}
				}
				if r.zone != "" {
					queries = append(queries, dstQueries...)
				}
				p := compilePeers(t, r, st.years, st.days)
				for _, q := range queries {
					comparePeers(t, r, p, q)
				}
			})
		}
	}
}

// comparePeers follows each library for three executions from q and reports the first
// disagreement.
func comparePeers(t *testing.T, r peerRule, p peers, q time.Time) {
	t.Helper()
	rs, rr, cr := q, q, q
	for step := range 3 {
		o := p.resched.Next(rs, 0)
		if o.Done {
			t.Fatalf("%s after %s: resched says done (%v)", r.name, rs, o.Reason)
		}
		rs = o.Time
		rr = p.rrule.After(rr, false)
		if !rr.Equal(rs) {
			t.Errorf("%s after %s, step %d: resched %s, rrule-go %s", r.name, q.Format(time.RFC3339), step, rs.Format(time.RFC3339), rr.UTC().Format(time.RFC3339))
			return
		}
		if p.cron == nil {
			continue
		}
		cr = p.cron.Next(cr)
		if !cr.Equal(rs) {
			t.Errorf("%s after %s, step %d: resched %s, cron %s", r.name, q.Format(time.RFC3339), step, rs.Format(time.RFC3339), cr.UTC().Format(time.RFC3339))
			return
		}
	}
}

// TestPeersDSTGap pins how each library runs "daily at 02:30 America/Chicago" on 2025-03-09,
// when 02:00–03:00 does not exist, because the benchmarks and docs/benchmarks.md rely on it:
//   - resched, per docs/recurrence.md §2: the wall time with the offset before the change, 08:30Z
//     (03:30 CDT);
//   - rrule-go: Go's time.Date normalisation, which takes the offset after the change, 07:30Z
//     (01:30 CST, an hour before the change);
//   - cron: skips the day; the next run is 2025-03-10 at 02:30 CDT (07:30Z).
func TestPeersDSTGap(t *testing.T) {
	r := peerRules[3]
	if r.name != "dst" {
		t.Fatalf("peerRules[3] is %q, want the dst rule", r.name)
	}
	p := compilePeers(t, r, 0, -1)
	q := time.Date(2025, time.March, 8, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		lib       string
		got, want time.Time
	}{
		{"resched", p.resched.Next(q, 0).Time, time.Date(2025, time.March, 9, 8, 30, 0, 0, time.UTC)},
		{"rrule-go", p.rrule.After(q, false), time.Date(2025, time.March, 9, 7, 30, 0, 0, time.UTC)},
		{"cron", p.cron.Next(q), time.Date(2025, time.March, 10, 7, 30, 0, 0, time.UTC)},
	} {
		if !c.got.Equal(c.want) {
			t.Errorf("%s: next after %s is %s, want %s", c.lib, q.Format(time.RFC3339), c.got.UTC().Format(time.RFC3339), c.want.Format(time.RFC3339))
		}
	}
}
