package recurrence_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/recurrence"
	"github.com/resched/resched/shared/timezone"
)

// input is one definition accepted at now.
type input struct {
	now   time.Time
	start *job.DateTime
	rec   *job.Recurrence
}

func (in input) String() string {
	start := "none"
	if in.start != nil {
		start = in.start.String()
	}
	rec, _ := json.Marshal(in.rec)
	return fmt.Sprintf("now %s start %s recurrence %s", in.now.UTC().Format(time.RFC3339), start, rec)
}

// engineRun collects the engine's executions up to until (at most max), chaining First and
// Next as the planner does; the last Occurrence is the one that stopped the walk.
func engineRun(s *recurrence.Schedule, until time.Time, max int) ([]time.Time, recurrence.Occurrence, string) {
	var got []time.Time
	occ := s.First()
	for !occ.Done && !occ.Time.After(until) && len(got) < max {
		if n := len(got); n > 0 && !occ.Time.After(got[n-1]) {
			return got, occ, fmt.Sprintf("not increasing: %s after %s", stamp(occ.Time), stamp(got[n-1]))
		}
		got = append(got, occ.Time)
		if len(got) == max {
			break
		}
		occ = s.Next(occ.Time, len(got))
	}
	return got, occ, ""
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func stamps(ts []time.Time) string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = stamp(t)
	}
	return strings.Join(out, " ")
}

// disagreement compares the engine with the oracle from acceptance to until, on at most max
// executions, and describes the first difference ("" when they agree). rng picks the
// in-between instants Next is also asked about.
func disagreement(in input, until time.Time, max int, rng *rand.Rand) string {
	o, err := newOracle(in.start, in.rec, in.now)
	if err != nil {
		return "oracle: " + err.Error()
	}
	want := o.executions(until, max)
	s, err := recurrence.Compile(in.start, in.rec, in.now)
	if err != nil {
		return "compile: " + err.Error()
	}
	got, last, bad := engineRun(s, until, max)
	if bad != "" {
		return bad
	}
	if !slices.Equal(got, want.times) {
		return fmt.Sprintf("executions differ\n  got  %s\n  want %s", stamps(got), stamps(want.times))
	}
	if want.done {
		if len(got) == max { // stopped by max: ask for one more
			last = s.Next(got[len(got)-1], len(got))
		}
		if !last.Done || last.Reason != want.reason {
			return fmt.Sprintf("after %d executions: got %+v, want Done (%v)", len(got), last, want.reason)
		}
	} else if last.Done && len(got) < max {
		if msg := o.confirmEarlyDone(last, got, until); msg != "" {
			return msg
		}
	}
	if p := s.Preview(len(got)); !slices.Equal(p, got) {
		return fmt.Sprintf("Preview(%d) = %s, First/Next = %s", len(got), stamps(p), stamps(got))
	}
	return nextBetween(s, got, rng)
}

// confirmEarlyDone accepts a Done the oracle has not reached by the end of the window when the
// oracle finds nothing either up to endTime (EndTime), or within the 50-year horizon (NoMatch;
// checked in full for calendar frequencies, where the oracle skips empty days, and over the
// window only for clock ones).
func (o *oracle) confirmEarlyDone(last recurrence.Occurrence, got []time.Time, until time.Time) string {
	base := o.now
	if o.start != nil && *o.start > base {
		base = *o.start
	}
	if n := len(got); n > 0 && got[n-1].Unix() > base {
		base = got[n-1].Unix()
	}
	var limit int64
	switch {
	case last.Reason == recurrence.EndTime && o.end != nil:
		limit = *o.end
	case last.Reason == recurrence.NoMatch && !o.clockFrequency():
		limit = time.Unix(base, 0).Add(recurrence.Horizon).Unix() - day
	case last.Reason == recurrence.NoMatch:
		return ""
	default:
		return fmt.Sprintf("after %d executions: got %+v, the oracle goes on", len(got), last)
	}
	var found int64
	o.walk(until.Unix()+1, limit, func(t int64) bool {
		found = t
		return false
	})
	if found != 0 && (o.end == nil || found <= *o.end) {
		return fmt.Sprintf("engine says %v after %d executions, oracle finds %s", last.Reason, len(got), stamp(time.Unix(found, 0)))
	}
	return ""
}

// nextBetween asks Next about instants between executions: it must answer the following one.
func nextBetween(s *recurrence.Schedule, got []time.Time, rng *rand.Rand) string {
	for i := 1; i < len(got); i++ {
		gap := got[i].Sub(got[i-1])
		x := got[i-1].Add(time.Duration(rng.Int64N(int64(gap/time.Second))) * time.Second)
		if occ := s.Next(x, i); occ.Done || !occ.Time.Equal(got[i]) {
			return fmt.Sprintf("Next(%s, %d) = %+v, want %s", stamp(x), i, occ, stamp(got[i]))
		}
	}
	return ""
}

var propertyZones = []string{"", "UTC", "America/Chicago", "Europe/London", "Australia/Lord_Howe",
	"Asia/Kolkata", "Pacific/Apia", "America/Santiago"}

// change is one offset change of a zone: at that instant the offset goes from before to after.
type change struct{ at, before, after int64 }

// transitions lists each zone's offset changes in 2009–2026, where the windows are put.
func transitions(t *testing.T) map[string][]change {
	lo := time.Date(2009, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC).Unix()
	out := map[string][]change{}
	for _, name := range propertyZones[1:] {
		loc, err := timezone.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		spans := zoneSpans(loc, lo, hi)
		for i := 0; i+1 < len(spans); i++ {
			out[name] = append(out[name], change{spans[i].end, spans[i].off, spans[i+1].off})
		}
	}
	return out
}

// window is how far past acceptance a case is compared, by frequency: long enough for several
// executions, short enough for the oracle's walk.
var window = map[job.Frequency]time.Duration{
	job.Second: 2 * time.Hour, job.Minute: 48 * time.Hour, job.Hour: 6 * 24 * time.Hour,
	job.Day: 40 * 24 * time.Hour, job.Week: 200 * 24 * time.Hour,
	job.Month: 4 * 365 * 24 * time.Hour, job.Year: 12 * 365 * 24 * time.Hour,
}

// TestPropertyAgainstOracle compares the engine with the oracle on random definitions. The seed
// is fixed so that runs are repeatable; RECURRENCE_SEED=n explores others.
func TestPropertyAgainstOracle(t *testing.T) {
	seed := uint64(1)
	if s := os.Getenv("RECURRENCE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	cases := 2500
	if testing.Short() {
		cases = 150
	}
	tr := transitions(t)
	failures := 0
	for i := range cases {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		in, until := randomInput(rng, tr)
		var msg string
		if !returns(func() { msg = disagreement(in, until, 60, rng) }) {
			t.Fatalf("RECURRENCE_SEED=%d case %d: %s: no answer within %v", seed, i, in, hangLimit)
		}
		if msg != "" {
			t.Errorf("RECURRENCE_SEED=%d case %d: %s (window to %s)\n  %s", seed, i, in, stamp(until), msg)
			if failures++; failures == 10 {
				t.Fatal("stopping after 10 failures")
			}
		}
	}
}

// hangLimit is far above any legitimate answer (milliseconds; the oracle's longest walks take
// well under a second), so it cannot flake: it only turns an endless loop into a failure that
// names its input instead of the package's ten-minute timeout.
const hangLimit = 10 * time.Second

// returns runs f and reports whether it returned within hangLimit. A call that never returns
// keeps its goroutine; the test fails, so that only costs the rest of the run some CPU.
func returns(f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-time.After(hangLimit):
		return false
	}
}

func randomInput(rng *rand.Rand, tr map[string][]change) (input, time.Time) {
	freq := job.Frequency(1 + rng.IntN(7))
	rec := &job.Recurrence{Frequency: freq, TimeZone: propertyZones[rng.IntN(len(propertyZones))]}
	rec.Interval = randomInterval(rng, freq)
	win := window[freq]
	now := randomNow(rng, tr[rec.TimeZone], win)
	in := input{now: now, rec: rec}
	if rng.IntN(8) == 0 {
		in.rec = nil
	} else {
		rec.Schedule = randomSchedule(rng, freq)
	}
	if rng.IntN(6) != 0 {
		in.start = randomStart(rng, now, win, tr[rec.TimeZone])
	}
	if rng.IntN(3) == 0 {
		rec.Count = 1 + rng.IntN(12)
	}
	if rng.IntN(4) == 0 {
		e := randomTime(rng, now.Add(time.Duration(rng.Int64N(int64(win)*5/4))-win/4))
		rec.EndTime = &e
	}
	return in, now.Add(win)
}

func randomInterval(rng *rand.Rand, f job.Frequency) int {
	small := map[job.Frequency]int{job.Second: 120, job.Minute: 90, job.Hour: 30, job.Day: 5, job.Week: 4, job.Month: 6, job.Year: 1}[f]
	large := map[job.Frequency]int{job.Second: 5000, job.Minute: 1000, job.Hour: 1000, job.Day: 548, job.Week: 78, job.Month: 18, job.Year: 1}[f]
	switch rng.IntN(8) {
	case 0:
		return 0 // the default
	case 1:
		return 1 + rng.IntN(large)
	}
	return 1 + rng.IntN(small)
}

// randomNow puts acceptance shortly before an offset change of the zone, most of the time.
func randomNow(rng *rand.Rand, changes []change, win time.Duration) time.Time {
	if len(changes) > 0 && rng.IntN(5) != 0 {
		c := changes[rng.IntN(len(changes))]
		return time.Unix(c.at-rng.Int64N(int64(win/time.Second)), 0).UTC()
	}
	lo := time.Date(2010, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	return time.Unix(lo+rng.Int64N(16*365*day), 0).UTC()
}

// randomStart is a startTime near now, in the past or the future, in each of the accepted
// forms; sometimes a wall time with no offset inside a gap or a repeated stretch.
func randomStart(rng *rand.Rand, now time.Time, win time.Duration, changes []change) *job.DateTime {
	var at time.Time
	switch rng.IntN(5) {
	case 0:
		at = now.Add(-time.Duration(rng.Int64N(int64(3 * win))))
	case 1:
		at = now.Add(time.Duration(rng.Int64N(int64(win / 2))))
	case 2:
		at = now
	case 3:
		if d := nearChange(rng, now, win, changes); d != nil {
			return d
		}
		fallthrough
	default:
		at = now.Add(time.Duration(rng.Int64N(int64(win/2))) - win/4)
	}
	d := randomTime(rng, at)
	return &d
}

// nearChange returns a wall time (no offset) that does not exist or occurs twice, at an
// offset change between 3 windows before now and half a window after; nil when none is near.
func nearChange(rng *rand.Rand, now time.Time, win time.Duration, changes []change) *job.DateTime {
	var near []change
	for _, c := range changes {
		if d := time.Unix(c.at, 0).Sub(now); d > -3*win && d < win/2 {
			near = append(near, c)
		}
	}
	if len(near) == 0 {
		return nil
	}
	c := near[rng.IntN(len(near))]
	lo, hi := min(c.before, c.after), max(c.before, c.after)
	w := civilOf(c.at + lo + rng.Int64N(hi-lo))
	if rng.IntN(2) == 0 {
		w.ss = 0
	}
	return &job.DateTime{Year: w.y, Month: w.m, Day: w.d, Hour: w.hh, Minute: w.mm, Second: w.ss}
}

// randomTime writes an instant in one of the accepted forms: a wall time with no offset (read
// in the job's zone), Z, another offset, or a date alone. It rounds to whole minutes mostly.
func randomTime(rng *rand.Rand, at time.Time) job.DateTime {
	if rng.IntN(3) != 0 {
		at = at.Truncate(time.Minute)
	}
	switch rng.IntN(10) {
	case 0:
		d := job.DateTimeOf(at)
		return job.DateTime{Year: d.Year, Month: d.Month, Day: d.Day, DateOnly: true}
	case 1, 2:
		return job.DateTimeOf(at)
	case 3:
		off := []int{-3 * 3600, 5*3600 + 1800, 10*3600 + 1800, -11 * 3600}[rng.IntN(4)]
		l := at.In(time.FixedZone("", off))
		return job.DateTime{Year: l.Year(), Month: l.Month(), Day: l.Day(), Hour: l.Hour(),
			Minute: l.Minute(), Second: l.Second(), HasOffset: true, Offset: off}
	}
	d := job.DateTimeOf(at) // the instant's UTC fields, read later as a wall time in the zone
	d.HasOffset = false
	return d
}

func randomSchedule(rng *rand.Rand, f job.Frequency) *job.Schedule {
	s := &job.Schedule{}
	if rng.IntN(2) == 0 {
		s.Hours = randomInts(rng, 0, 23, []int{1, 2, 3, 23})
	}
	if rng.IntN(2) == 0 {
		s.Minutes = randomInts(rng, 0, 59, []int{0, 15, 30, 45})
	}
	switch f {
	case job.Week:
		if rng.IntN(2) == 0 {
			for _, d := range randomInts(rng, 0, 6, nil) {
				s.WeekDays = append(s.WeekDays, job.Weekday(d))
			}
		}
	case job.Month, job.Year:
		if rng.IntN(5) < 2 {
			s.MonthDays = randomInts(rng, -31, 31, []int{-1, 1, 28, 29, 30, 31, -31})
			s.MonthDays = slices.DeleteFunc(s.MonthDays, func(v int) bool { return v == 0 })
		}
		if rng.IntN(5) < 2 {
			for range 1 + rng.IntN(3) {
				occ := []int{0, 1, 2, 3, 4, 5, -1, -2, -5}[rng.IntN(9)]
				s.MonthlyOccurrences = append(s.MonthlyOccurrences, job.MonthlyOccurrence{Day: job.Weekday(rng.IntN(7)), Occurrence: occ})
			}
		}
		if rng.IntN(5) < 2 {
			s.Months = randomInts(rng, 1, 12, []int{2, 3, 4})
		}
	}
	if len(s.Hours)+len(s.Minutes)+len(s.WeekDays)+len(s.MonthDays)+len(s.MonthlyOccurrences)+len(s.Months) == 0 {
		return nil // an empty schedule object is rejected (§8)
	}
	return s
}

// randomInts draws 1–4 values in [lo, hi], from favourites half of the time, duplicates allowed;
// sometimes every value.
func randomInts(rng *rand.Rand, lo, hi int, favourites []int) job.IntList {
	if rng.IntN(12) == 0 {
		var all job.IntList
		for v := lo; v <= hi; v++ {
			all = append(all, v)
		}
		return all
	}
	var out job.IntList
	for range 1 + rng.IntN(4) {
		if len(favourites) > 0 && rng.IntN(2) == 0 {
			out = append(out, favourites[rng.IntN(len(favourites))])
		} else {
			out = append(out, lo+rng.IntN(hi-lo+1))
		}
	}
	return out
}
