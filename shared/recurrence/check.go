package recurrence

import (
	"fmt"

	"github.com/resched/resched/shared/job"
)

// intervalMax is the largest interval of each frequency (docs/recurrence.md §3).
var intervalMax = [...]int{
	job.Second: 9_999_999, job.Minute: 1000, job.Hour: 1000,
	job.Day: 548, job.Week: 78, job.Month: 18, job.Year: 1,
}

// checkRecurrence refuses what the engine cannot run, so that Compile never panics on input
// that skipped intake validation. Intake (package jobschema) reports the same rules with every
// problem at once; this stops at the first.
func checkRecurrence(r *job.Recurrence) error {
	if r.Frequency < job.Second || r.Frequency > job.Year {
		return fmt.Errorf("recurrence.frequency: must be one of Second, Minute, Hour, Day, Week, Month, Year")
	}
	if iv, hi := r.IntervalOrDefault(), intervalMax[r.Frequency]; iv < 1 || iv > hi {
		return fmt.Errorf("recurrence.interval: must be between 1 and %d for frequency %s", hi, r.Frequency)
	}
	if r.Count < 0 {
		return fmt.Errorf("recurrence.count: must be at least 1")
	}
	if r.Schedule == nil {
		return nil
	}
	return checkSchedule(r.Frequency, r.Schedule)
}

func checkSchedule(f job.Frequency, s *job.Schedule) error {
	monthly := f == job.Month || f == job.Year
	switch {
	case len(s.WeekDays) > 0 && f != job.Week:
		return fmt.Errorf("recurrence.schedule.weekDays: only allowed with frequency Week")
	case len(s.MonthDays) > 0 && !monthly:
		return fmt.Errorf("recurrence.schedule.monthDays: only allowed with frequency Month or Year")
	case len(s.MonthlyOccurrences) > 0 && !monthly:
		return fmt.Errorf("recurrence.schedule.monthlyOccurrences: only allowed with frequency Month or Year")
	case len(s.Months) > 0 && !monthly:
		return fmt.Errorf("recurrence.schedule.months: only allowed with frequency Month or Year")
	}
	checks := []struct {
		name     string
		values   []int
		lo, hi   int
		negative bool // -1 … -hi count from the end
	}{
		{"minutes", s.Minutes, 0, 59, false},
		{"hours", s.Hours, 0, 23, false},
		{"months", s.Months, 1, 12, false},
		{"monthDays", s.MonthDays, 1, 31, true},
	}
	for _, c := range checks {
		for i, v := range c.values {
			a := v
			if c.negative && a < 0 {
				a = -a
			}
			if a < c.lo || a > c.hi {
				return fmt.Errorf("recurrence.schedule.%s[%d]: %d is out of range", c.name, i, v)
			}
		}
	}
	for i, wd := range s.WeekDays {
		if wd < 0 || wd > 6 {
			return fmt.Errorf("recurrence.schedule.weekDays[%d]: unknown weekday", i)
		}
	}
	for i, o := range s.MonthlyOccurrences {
		if o.Day < 0 || o.Day > 6 {
			return fmt.Errorf("recurrence.schedule.monthlyOccurrences[%d].day: unknown weekday", i)
		}
		if o.Occurrence < -5 || o.Occurrence > 5 {
			return fmt.Errorf("recurrence.schedule.monthlyOccurrences[%d].occurrence: must be 1 to 5 or -1 to -5", i)
		}
	}
	return nil
}
