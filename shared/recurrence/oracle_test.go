package recurrence_test

// The oracle is a brute-force reference for docs/recurrence.md, written from the spec text and not
// from the engine. It answers one question, "is this instant an execution?", and finds the
// executions by trying every instant of a bounded window at the schedule's second (every second
// for Second frequency). It is slow on purpose: each rule is a direct transcription of the spec.

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/recurrence"
	"github.com/resched/resched/shared/timezone"
)

const day = 86400

// civil is a wall-clock time with no zone.
type civil struct {
	y             int
	m             time.Month
	d, hh, mm, ss int
}

// naive is the wall time read as if it were UTC, in Unix seconds: wall arithmetic on integers.
func (c civil) naive() int64 {
	return time.Date(c.y, c.m, c.d, c.hh, c.mm, c.ss, 0, time.UTC).Unix()
}

func civilOf(naive int64) civil {
	t := time.Unix(naive, 0).UTC()
	return civil{t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second()}
}

// dayNumber counts days since 1970-01-01 for the date of a wall time.
func (c civil) dayNumber() int64 {
	return civil{y: c.y, m: c.m, d: c.d}.naive() / day
}

func (c civil) weekday() time.Weekday {
	return time.Date(c.y, c.m, c.d, 0, 0, 0, 0, time.UTC).Weekday()
}

// span is one stretch of constant UTC offset: [start, end) in Unix seconds.
type span struct{ start, end, off int64 }

// zoneSpans lists the offset spans of loc that cover the instants [lo, hi]; the first starts
// and the last ends at the limits of int64. It samples the offset every 15 minutes and
// bisects each change to the second, assuming no zone changes its offset twice within 15
// minutes. It does not use Time.ZoneBounds, which past a zone's last explicit transition
// reports an end before the instant on the last day of leap years (golang/go#81583).
func zoneSpans(loc *time.Location, lo, hi int64) []span {
	var out []span
	cur := span{start: math.MinInt64, off: offsetIn(loc, lo)}
	for t := lo; t < hi; {
		next := min(t+900, hi)
		if offsetIn(loc, next) == cur.off {
			t = next
			continue
		}
		a, b := t, next // the offset changes in (a, b]
		for b-a > 1 {
			if m := a + (b-a)/2; offsetIn(loc, m) == cur.off {
				a = m
			} else {
				b = m
			}
		}
		cur.end = b
		out = append(out, cur)
		cur, t = span{start: b, off: offsetIn(loc, b)}, b
	}
	cur.end = math.MaxInt64
	return append(out, cur)
}

func offsetIn(loc *time.Location, t int64) int64 {
	_, off := time.Unix(t, 0).In(loc).Zone()
	return int64(off)
}

// resolveWall turns a wall time into its execution instant by docs/recurrence.md §2: the earliest
// instant that has that wall clock; in a gap, the wall time read with the offset in force
// before the change.
func resolveWall(loc *time.Location, w int64) int64 {
	spans := zoneSpans(loc, w-2*day, w+2*day)
	best, found := int64(0), false
	for _, s := range spans {
		if inst := w - s.off; inst >= s.start && inst < s.end && (!found || inst < best) {
			best, found = inst, true
		}
	}
	if found {
		return best
	}
	for i := 0; i+1 < len(spans); i++ {
		if spans[i].end+spans[i].off <= w && w < spans[i+1].start+spans[i+1].off {
			return w - spans[i].off
		}
	}
	panic(fmt.Sprintf("oracle: wall time %v neither exists nor falls in a gap", civilOf(w)))
}

// oracle holds a definition as docs/recurrence.md states it, nothing precomputed beyond the anchor.
type oracle struct {
	loc      *time.Location
	rec      bool
	freq     job.Frequency
	interval int64
	a        civil // the anchor's wall time (§4)
	aInst    int64 // the anchor's instant
	now      int64
	start    *int64
	end      *int64
	count    int
	sched    job.Schedule
}

func newOracle(start *job.DateTime, rec *job.Recurrence, now time.Time) (*oracle, error) {
	o := &oracle{loc: time.UTC, now: now.Unix(), interval: 1}
	if rec != nil {
		o.rec, o.freq, o.count = true, rec.Frequency, rec.Count
		if rec.Interval != 0 {
			o.interval = int64(rec.Interval)
		}
		if rec.Schedule != nil {
			o.sched = *rec.Schedule
		}
		if rec.TimeZone != "" {
			loc, err := timezone.Load(rec.TimeZone)
			if err != nil {
				return nil, err
			}
			o.loc = loc
		}
		if rec.EndTime != nil {
			e := o.instant(*rec.EndTime)
			o.end = &e
		}
	}
	switch {
	case start == nil:
		o.aInst = o.now
		o.a = civilOf(o.now + o.offsetAt(o.now))
	case start.HasOffset:
		o.aInst = o.instant(*start) + roundUp(start)
		o.a = civilOf(o.aInst + o.offsetAt(o.aInst))
	default:
		o.a = civilOf(civil{start.Year, start.Month, start.Day, start.Hour, start.Minute, start.Second}.naive() + roundUp(start))
		o.aInst = resolveWall(o.loc, o.a.naive())
	}
	if start != nil {
		s := o.aInst
		o.start = &s
	}
	return o, nil
}

// roundUp is the second a fraction adds to a start (§2: never before the instant asked for).
func roundUp(d *job.DateTime) int64 {
	if d.Nanosecond > 0 {
		return 1
	}
	return 0
}

// instant reads a time text: an offset is absolute, otherwise wall time in the job's zone.
func (o *oracle) instant(d job.DateTime) int64 {
	w := civil{d.Year, d.Month, d.Day, d.Hour, d.Minute, d.Second}.naive()
	if d.HasOffset {
		return w - int64(d.Offset)
	}
	return resolveWall(o.loc, w)
}

func (o *oracle) offsetAt(t int64) int64 { return offsetIn(o.loc, t) }

func (o *oracle) clockFrequency() bool {
	return o.freq == job.Second || o.freq == job.Minute || o.freq == job.Hour
}

// inSeriesNear reports whether instant t is a time of the series or schedule (§4–§6), before
// the first-execution, count and endTime rules of §7; near holds the zone's spans over at least
// [t-2 days, t+2 days].
func (o *oracle) inSeriesNear(t int64, near []span) bool {
	if o.clockFrequency() {
		return o.clockMatches(t)
	}
	// The wall times that can stand for t: t read with any offset the zone has near t. A wall
	// time in a gap runs at an instant whose own wall clock differs (§2), hence all of them.
	for _, s := range near {
		if w := t + s.off; o.wallMatches(civilOf(w)) && resolveWall(o.loc, w) == t {
			return true
		}
	}
	return false
}

// clockMatches is §4/§6 for Second, Minute and Hour: absolute steps, wall-clock filters.
//
// Hour without explicit minutes is read as the series A + k·interval hours (§5: "hour adds
// fixed durations"), filtered by the wall hour: the default "minute of A" is A's place in its
// period, not a wall minute, so {"hours":[0…23]} is the same as no schedule. The two readings
// differ only across a 30-minute offset change (Lord Howe).
func (o *oracle) clockMatches(t int64) bool {
	unit := map[job.Frequency]int64{job.Second: 1, job.Minute: 60, job.Hour: 3600}[o.freq]
	w := civilOf(t + o.offsetAt(t))
	if o.freq != job.Hour || len(o.sched.Minutes) == 0 {
		diff := t - o.aInst
		if diff < 0 || diff%(o.interval*unit) != 0 {
			return false
		}
		return filter(o.sched.Hours, w.hh) && filter(o.sched.Minutes, w.mm)
	}
	p0 := o.aInst - int64(o.a.mm*60+o.a.ss) // the beginning of A's wall-clock hour
	diff := t - p0
	if diff < 0 || (diff/3600)%o.interval != 0 || (t-o.aInst)%60 != 0 {
		return false
	}
	return filter(o.sched.Hours, w.hh) && slices.Contains(o.sched.Minutes, w.mm)
}

// filter is "absent means any".
func filter(list job.IntList, v int) bool {
	return len(list) == 0 || slices.Contains(list, v)
}

// wallMatches is §4–§6 for Day, Week, Month and Year on one wall time.
func (o *oracle) wallMatches(w civil) bool {
	if w.ss != o.a.ss || !o.dateMatches(w) {
		return false
	}
	hours := o.sched.Hours
	if len(hours) == 0 && len(o.sched.Minutes) == 0 {
		hours = job.IntList{o.a.hh}
	}
	mins := o.sched.Minutes
	if len(mins) == 0 {
		mins = job.IntList{o.a.mm}
	}
	return filter(hours, w.hh) && filter(mins, w.mm)
}

// dateMatches says whether the date of w is in a period and its day is a scheduled day.
func (o *oracle) dateMatches(w civil) bool {
	switch o.freq {
	case job.Day:
		d := w.dayNumber() - o.a.dayNumber()
		return d >= 0 && d%o.interval == 0
	case job.Week:
		d := mondayOf(w) - mondayOf(o.a)
		if d < 0 || (d/7)%o.interval != 0 {
			return false
		}
		days := o.sched.WeekDays
		if len(days) == 0 {
			days = []job.Weekday{job.Weekday(o.a.weekday())}
		}
		return slices.Contains(days, job.Weekday(w.weekday()))
	case job.Month:
		d := int64(w.y*12+int(w.m)) - int64(o.a.y*12+int(o.a.m))
		return d >= 0 && d%o.interval == 0 && filter(o.sched.Months, int(w.m)) && o.dayMatches(w)
	case job.Year:
		months := o.sched.Months
		if len(months) == 0 {
			months = job.IntList{int(o.a.m)}
		}
		d := int64(w.y - o.a.y)
		return d >= 0 && d%o.interval == 0 && slices.Contains(months, int(w.m)) && o.dayMatches(w)
	}
	panic("oracle: not a calendar frequency")
}

func mondayOf(c civil) int64 {
	return c.dayNumber() - int64((c.weekday()+6)%7)
}

// dayMatches is the union of monthDays and monthlyOccurrences, or the day of A.
func (o *oracle) dayMatches(w civil) bool {
	if len(o.sched.MonthDays) == 0 && len(o.sched.MonthlyOccurrences) == 0 {
		return w.d == o.a.d
	}
	n := job.DaysIn(w.y, w.m)
	for _, md := range o.sched.MonthDays {
		if md == w.d || (md < 0 && n+md+1 == w.d) {
			return true
		}
	}
	for _, mo := range o.sched.MonthlyOccurrences {
		if job.Weekday(w.weekday()) != mo.Day {
			continue
		}
		switch {
		case mo.Occurrence == 0,
			mo.Occurrence > 0 && (w.d-1)/7+1 == mo.Occurrence,
			mo.Occurrence < 0 && (n-w.d)/7+1 == -mo.Occurrence:
			return true
		}
	}
	return false
}

// verdict is what the oracle knows after walking a window.
type verdict struct {
	times  []time.Time
	done   bool // the job is over once times have run
	reason recurrence.Reason
}

// executions walks from acceptance to until (inclusive) and returns the executions (§7), at
// most max of them.
func (o *oracle) executions(until time.Time, max int) verdict {
	if o.end != nil && *o.end < o.now {
		return verdict{done: true, reason: recurrence.EndTime}
	}
	if !o.rec {
		t := o.now
		if o.start != nil && *o.start > t {
			t = *o.start
		}
		if t > until.Unix() {
			return verdict{} // beyond the window: nothing known yet
		}
		return verdict{times: []time.Time{time.Unix(t, 0).UTC()}, done: true, reason: recurrence.OneTime}
	}
	var v verdict
	emit := func(t int64) bool {
		if o.end != nil && t > *o.end {
			v.done, v.reason = true, recurrence.EndTime
			return false
		}
		v.times = append(v.times, time.Unix(t, 0).UTC())
		if o.count > 0 && len(v.times) == o.count {
			v.done, v.reason = true, recurrence.CountMet
		}
		return !v.done && len(v.times) < max
	}
	lower := o.now
	if o.start == nil {
		if !emit(o.now) {
			return v
		}
		lower++
	} else if *o.start > lower {
		lower = *o.start
	}
	o.walk(lower, until.Unix(), emit)
	if !v.done && o.end != nil && *o.end <= until.Unix() && len(v.times) < max {
		v.done, v.reason = true, recurrence.EndTime
	}
	return v
}

// walk calls emit for every series instant in [lo, hi], in order, while emit returns true.
func (o *oracle) walk(lo, hi int64, emit func(int64) bool) {
	step, phase := int64(60), ((o.aInst%60)+60)%60
	if o.freq == job.Second {
		step, phase = 1, 0
	}
	t := lo + ((phase-lo)%step+step)%step
	for t <= hi {
		if !o.clockFrequency() && !o.blockMayMatch(t) {
			t += day // nothing on the wall dates this day of instants can have
			continue
		}
		near := zoneSpans(o.loc, t-2*day, t+3*day)
		for blockEnd := t + day; t < blockEnd && t <= hi; t += step {
			if o.inSeriesNear(t, near) && !emit(t) {
				return
			}
		}
	}
}

// blockMayMatch says whether any wall date that an instant of [t, t+1 day) can stand for
// passes dateMatches. Offsets, and the offsets before a change, lie within ±16 hours.
func (o *oracle) blockMayMatch(t int64) bool {
	first, last := civilOf(t-16*3600).dayNumber(), civilOf(t+day+16*3600).dayNumber()
	for d := first; d <= last; d++ {
		if o.dateMatches(civilOf(d * day)) {
			return true
		}
	}
	return false
}
