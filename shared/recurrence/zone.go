package recurrence

import (
	"math"
	"time"
)

// zone answers "what offset is in force at this instant" and turns wall-clock times into
// instants by the rules of docs/recurrence.md §2. UTC and fixed offsets skip the tz database.
type zone struct {
	loc   *time.Location // nil for a fixed offset
	fixed int64          // the offset in seconds, when loc is nil
}

func newZone(loc *time.Location) zone {
	if loc == nil || loc == time.UTC || loc.String() == "UTC" {
		return zone{}
	}
	return zone{loc: loc}
}

// span is a stretch of instants [start, end) with one offset.
type span struct{ start, end, off int64 }

func (z *zone) spanAt(t int64) span {
	if z.loc == nil {
		return span{math.MinInt64, math.MaxInt64, z.fixed}
	}
	tt := time.Unix(t, 0).In(z.loc)
	_, off := tt.Zone()
	sp := span{math.MinInt64, math.MaxInt64, int64(off)}
	start, end := tt.ZoneBounds()
	if !start.IsZero() {
		sp.start = start.Unix()
	}
	if !end.IsZero() {
		sp.end = end.Unix()
	}
	if t < sp.start || t >= sp.end {
		// ZoneBounds can return a span that misses t (on the last day of leap years past the
		// tz table, in zones with DST: golang/go#81583). The offset is right; trust it for this
		// one second only, so a search always moves on.
		return span{t, t + 1, int64(off)}
	}
	return sp
}

// nearby bounds how far apart two offsets in force around one moment can be. Every offset change
// on record is at most a day (Samoa skipped 2011-12-30), so two days is a safe margin.
const nearby = 2 * secondsPerDay

// cursor caches the span it last looked at: the times one search visits are close together,
// so most lookups cost two comparisons. A cursor lives on the stack of one search; the
// compiled Schedule stays immutable and safe for concurrent use.
type cursor struct {
	z  *zone
	sp span
}

func (z *zone) cursor(t int64) cursor {
	return cursor{z: z, sp: z.spanAt(t)}
}

// offset returns the offset in force at instant t.
func (c *cursor) offset(t int64) int64 {
	if t < c.sp.start || t >= c.sp.end {
		c.sp = c.z.spanAt(t)
	}
	return c.sp.off
}

// wall returns the wall-clock time of instant t.
func (c *cursor) wall(t int64) int64 { return t + c.offset(t) }

// resolve returns the instant of wall time w: the one instant with that wall time; the earlier
// one when it occurs twice (fall back); and, when it does not exist (spring forward), the
// instant it has with the offset in force before the change.
func (c *cursor) resolve(w int64) int64 {
	if t := w - c.sp.off; t-nearby >= c.sp.start && t+nearby < c.sp.end {
		return t // deep inside one span: no other offset can claim w
	}
	before, after := c.offset(w-nearby), c.offset(w+nearby)
	best := never
	for _, o := range [2]int64{before, after} {
		if t := w - o; c.offset(t) == o && t < best {
			best = t
		}
	}
	if best == never {
		return w - before
	}
	return best
}

// offsetRange returns the smallest and largest offsets in force within two days of t: a
// wall time w can only map to an instant near t if w - t lies between them.
func (c *cursor) offsetRange(t int64) (lo, hi int64) {
	o := c.offset(t)
	if t-nearby >= c.sp.start && t+nearby < c.sp.end {
		return o, o
	}
	lo, hi = o, o
	for _, x := range [2]int64{c.offset(t - nearby), c.offset(t + nearby)} {
		lo, hi = min(lo, x), max(hi, x)
	}
	c.offset(t)
	return lo, hi
}
