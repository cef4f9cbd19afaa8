package recurrence

import (
	"fmt"
	"time"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/timezone"
)

// Horizon is how far past the later of now, startTime and the previous execution a search for
// the next execution looks before it declares the series over (docs/recurrence.md §7).
const Horizon = 50 * 31556952 * time.Second // 50 mean Gregorian years

// Reason says why a series has no further execution.
type Reason int

// The reasons a series ends.
const (
	NotDone  Reason = iota
	OneTime         // a job without recurrence ran its single execution
	CountMet        // recurrence.count executions were made
	EndTime         // the next time would be after recurrence.endTime
	NoMatch         // nothing matches within the 50-year horizon, or before MaxTime
)

// MaxTime is the last instant the engine schedules: times past the year 9999 cannot be written
// as RFC 3339, so a series that would reach them ends there (docs/recurrence.md §7).
var MaxTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

var maxInstant = MaxTime.Unix()

func (r Reason) String() string {
	switch r {
	case NotDone:
		return "not done"
	case OneTime:
		return "one-time job executed"
	case CountMet:
		return "recurrence.count reached"
	case EndTime:
		return "recurrence.endTime reached"
	case NoMatch:
		return "no execution time within 50 years or before the year 10000"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Occurrence is the answer of First and Next: an execution time, or Done with its Reason.
type Occurrence struct {
	Time   time.Time // UTC, whole seconds; zero when Done
	Done   bool
	Reason Reason
}

func done(r Reason) Occurrence { return Occurrence{Done: true, Reason: r} }

// Schedule is a compiled definition. It is immutable, so one Schedule may serve any number of
// goroutines.
type Schedule struct {
	zone      zone
	now       int64     // acceptance instant, whole seconds
	nowTime   time.Time // acceptance instant to the millisecond: the time of an immediate run
	floor     int64     // no execution before this instant: max(startTime, now)
	immediate bool      // no startTime: the first execution is now
	oneTime   bool      // no recurrence
	count     int       // 0: unbounded
	end       int64     // never: no endTime
	// anchor is A's instant when a startTime with an explicit offset names the second instance
	// of a repeated wall-clock hour: the engine resolves A's wall time to the first instance,
	// but A itself is the first execution (docs/recurrence.md §4). 0 when that does not apply.
	anchor int64

	freq     job.Frequency
	interval int64
	cal      calendar // Day, Week, Month, Year
	clk      clock    // Second, Minute, Hour
}

// Compile prepares a definition accepted at instant now: startTime (nil when absent) and
// recurrence (nil for a one-time job). It rejects what the engine cannot run with an error that
// names the field; full intake validation is the jobschema package's job.
func Compile(start *job.DateTime, rec *job.Recurrence, now time.Time) (*Schedule, error) {
	s := &Schedule{now: now.Unix(), nowTime: now.UTC().Truncate(time.Millisecond), end: never}
	var loc *time.Location
	if rec != nil && rec.TimeZone != "" {
		l, err := timezone.Load(rec.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("recurrence.timeZone: %w", err)
		}
		loc = l
	}
	s.zone = newZone(loc)
	c := s.zone.cursor(s.now)

	// The anchor A: its instant and its wall time (docs/recurrence.md §4).
	var anchorWall, anchorInstant int64
	switch {
	case start == nil:
		s.immediate = true
		anchorInstant, anchorWall = s.now, c.wall(s.now)
	case start.HasOffset && !start.DateOnly:
		anchorInstant = startSeconds(start) - int64(start.Offset)
		anchorWall = c.wall(anchorInstant)
	default:
		anchorWall = startSeconds(start)
		anchorInstant = c.resolve(anchorWall)
	}
	s.floor = max(anchorInstant, s.now)
	if rec == nil {
		s.oneTime = true
		return s, nil
	}
	if err := s.compileRecurrence(rec, anchorWall, anchorInstant, &c); err != nil {
		return nil, err
	}
	if start != nil && start.HasOffset && s.freq > job.Hour && anchorInstant >= s.now {
		// A's wall time resolves to another instant than the one given (the other instance of
		// a repeated hour): if that resolution is an execution, A's own instant replaces it.
		if alt := c.resolve(anchorWall); alt != anchorInstant {
			if o := s.next(alt - 1); !o.Done && o.Time.Unix() == alt {
				s.anchor = anchorInstant
			}
		}
	}
	return s, nil
}

func (s *Schedule) compileRecurrence(rec *job.Recurrence, anchorWall, anchorInstant int64, c *cursor) error {
	if err := checkRecurrence(rec); err != nil {
		return err
	}
	s.freq, s.interval, s.count = rec.Frequency, int64(rec.IntervalOrDefault()), rec.Count
	if rec.EndTime != nil {
		if rec.EndTime.HasOffset && !rec.EndTime.DateOnly {
			s.end = wallSeconds(rec.EndTime) - int64(rec.EndTime.Offset)
		} else {
			s.end = c.resolve(wallSeconds(rec.EndTime))
		}
	}
	sch := rec.Schedule
	if sch == nil {
		sch = &job.Schedule{}
	}
	switch s.freq {
	case job.Second, job.Minute, job.Hour:
		s.clk = newClock(s.freq, s.interval, sch, anchorWall, anchorInstant)
	default:
		s.cal = newCalendar(s.freq, s.interval, sch, anchorWall)
	}
	return nil
}

// wallSeconds returns the pseudo-UTC seconds of the fields as written.
func wallSeconds(d *job.DateTime) int64 {
	days := daysFromCivil(int64(d.Year), d.Month, d.Day)
	if d.DateOnly {
		return days * secondsPerDay
	}
	return days*secondsPerDay + int64(d.Hour*3600+d.Minute*60+d.Second)
}

// startSeconds is wallSeconds of a startTime. The engine counts whole seconds: a start with a
// fraction begins at the next second, never before the instant asked for.
func startSeconds(d *job.DateTime) int64 {
	if d.Nanosecond != 0 && !d.DateOnly {
		return wallSeconds(d) + 1
	}
	return wallSeconds(d)
}

// First returns the first execution, the one the planner schedules at acceptance.
func (s *Schedule) First() Occurrence {
	switch {
	case s.immediate && s.now > s.end:
		return done(EndTime)
	case s.floor > maxInstant:
		return done(NoMatch)
	case (s.immediate || s.oneTime) && s.floor == s.now:
		return Occurrence{Time: s.nowTime} // now, to the millisecond: no lag for an immediate run
	case s.immediate || s.oneTime:
		return Occurrence{Time: time.Unix(s.floor, 0).UTC()}
	}
	return s.next(s.floor - 1)
}

// Next returns the first execution strictly after `after`, given that `fired` executions have
// been made since acceptance (they count against recurrence.count). Its cost does not depend on
// how far `after` is from the start of the series.
func (s *Schedule) Next(after time.Time, fired int) Occurrence {
	switch {
	case s.oneTime:
		return done(OneTime)
	case s.count > 0 && fired >= s.count:
		return done(CountMet)
	}
	return s.next(max(after.Unix(), s.floor-1))
}

// CountMet reports whether fired executions use up recurrence.count.
func (s *Schedule) CountMet(fired int) bool {
	return s.oneTime && fired > 0 || s.count > 0 && fired >= s.count
}

func (s *Schedule) next(after int64) Occurrence {
	if s.anchor != 0 && after < s.anchor {
		return Occurrence{Time: time.Unix(s.anchor, 0).UTC()} // the first execution (A = floor)
	}
	limit := min(after+int64(Horizon/time.Second), maxInstant)
	bound := min(limit, s.end)
	var t int64
	var ok bool
	if s.freq <= job.Hour {
		t, ok = s.clk.next(&s.zone, after, bound)
	} else {
		t, ok = s.cal.next(&s.zone, after, bound)
	}
	switch {
	case ok:
		return Occurrence{Time: time.Unix(t, 0).UTC()}
	case bound == s.end:
		return done(EndTime)
	}
	return done(NoMatch)
}

// Preview returns up to n executions in order, as the planner would make them.
func (s *Schedule) Preview(n int) []time.Time {
	out, _ := s.Upcoming(n)
	return out
}

// Upcoming returns up to n executions in order, as the planner would make them from its
// acceptance, and why there are fewer (NotDone when there are n).
func (s *Schedule) Upcoming(n int) ([]time.Time, Reason) {
	return s.collect(s.First(), 0, n)
}

// Following returns up to n executions from next, the execution due after fired ones were
// made (a stored job's state), and why there are fewer.
func (s *Schedule) Following(next time.Time, fired, n int) ([]time.Time, Reason) {
	return s.collect(Occurrence{Time: next}, fired, n)
}

func (s *Schedule) collect(o Occurrence, fired, n int) ([]time.Time, Reason) {
	var out []time.Time
	for ; !o.Done && len(out) < n; o = s.Next(o.Time, fired+len(out)) {
		out = append(out, o.Time)
	}
	if len(out) == n {
		return out, NotDone
	}
	return out, o.Reason
}
