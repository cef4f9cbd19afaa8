package recurrence_test

import (
	"math/bits"
	"testing"
	"time"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/recurrence"
)

var fuzzZones = []string{"", "UTC", "America/Chicago", "Europe/London", "Australia/Lord_Howe",
	"Asia/Kolkata", "Pacific/Apia", "America/Santiago", "Pacific Standard Time"}

// intervalMax is docs/recurrence.md §3; the fuzzer also tries one past each end.
var intervalMax = map[job.Frequency]uint32{job.Second: 9_999_999, job.Minute: 1000, job.Hour: 1000,
	job.Day: 548, job.Week: 78, job.Month: 18, job.Year: 1}

// FuzzNext builds a definition from raw fields (bit masks for the schedule lists) and checks
// that Compile either rejects it or yields a series whose First and Next return, never panic,
// and increase strictly.
func FuzzNext(f *testing.F) {
	f.Add(uint8(5), uint32(1), uint32(0), uint64(0), uint8(0), uint32(0), uint32(0), uint16(0), uint8(0), int8(0),
		int64(1552185000), uint8(1), int64(1552000000), uint8(2), uint8(0), int32(0))
	f.Add(uint8(1), uint32(7200), uint32(1<<3), uint64(1<<1), uint8(0), uint32(0), uint32(0), uint16(0), uint8(0), int8(0),
		int64(1680357000), uint8(2), int64(1680300000), uint8(4), uint8(3), int32(86400))
	f.Add(uint8(6), uint32(2), uint32(0), uint64(0), uint8(0), uint32(1<<31), uint32(1), uint16(1<<4), uint8(5), int8(-1),
		int64(1709251200), uint8(0), int64(1704067200), uint8(6), uint8(0), int32(-5))
	f.Add(uint8(7), uint32(1), uint32(1<<12), uint64(1), uint8(0), uint32(1<<29), uint32(0), uint16(1<<2), uint8(1), int8(5),
		int64(4107542400), uint8(3), int64(1325203200), uint8(5), uint8(9), int32(0))
	f.Fuzz(func(t *testing.T, freq uint8, interval uint32, hours uint32, minutes uint64, weekDays uint8,
		monthDays, negMonthDays uint32, months uint16, occDay uint8, occ int8,
		start int64, startForm uint8, now int64, zone uint8, count uint8, endDelta int32) {
		rec := &job.Recurrence{Frequency: job.Frequency(1 + freq%7), TimeZone: fuzzZones[int(zone)%len(fuzzZones)]}
		rec.Interval = int(interval%(intervalMax[rec.Frequency]+3)) - 1 // -1 … max+1
		rec.Count = int(count % 16)
		rec.Schedule = fuzzSchedule(rec.Frequency, hours, minutes, weekDays, monthDays, negMonthDays, months, occDay, occ)
		nowT := boundedTime(now)
		var st *job.DateTime
		if startForm%4 != 0 {
			d := fuzzDateTime(boundedTime(start), startForm)
			st = &d
		}
		if endDelta != 0 {
			e := job.DateTimeOf(nowT.Add(time.Duration(endDelta) * time.Minute))
			rec.EndTime = &e
		}
		if freq >= 128 {
			rec = nil // a one-time job
		}
		in := input{now: nowT, start: st, rec: rec}
		var msg string
		if !returns(func() { msg = fuzzSeries(in) }) {
			t.Fatalf("%s: no answer within %v", in, hangLimit)
		}
		if msg != "" {
			t.Fatalf("%s: %s", in, msg)
		}
	})
}

// fuzzSeries compiles a definition and walks a few executions; it describes what went wrong.
func fuzzSeries(in input) string {
	s, err := recurrence.Compile(in.start, in.rec, in.now)
	if err != nil {
		return "" // rejected: the validation tests cover what must be
	}
	occurrence := s.First()
	for fired := 1; fired <= 5 && !occurrence.Done; fired++ {
		next := s.Next(occurrence.Time, fired)
		if !next.Done && !next.Time.After(occurrence.Time) {
			return "Next(" + stamp(occurrence.Time) + ") = " + stamp(next.Time) + ": not after"
		}
		occurrence = next
	}
	return ""
}

// boundedTime maps any int64 to a whole second in years 1900–2200.
func boundedTime(x int64) time.Time {
	lo := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	span := hi - lo
	return time.Unix(lo+((x%span)+span)%span, 0).UTC()
}

// fuzzDateTime writes t as a wall time (form 1), with Z (2) or as a date alone (3).
func fuzzDateTime(t time.Time, form uint8) job.DateTime {
	d := job.DateTimeOf(t)
	switch form % 4 {
	case 1:
		d.HasOffset = false
	case 3:
		d = job.DateTime{Year: d.Year, Month: d.Month, Day: d.Day, DateOnly: true}
	}
	return d
}

// fuzzSchedule keeps only the lists the frequency allows (§8), so most inputs compile.
func fuzzSchedule(f job.Frequency, hours uint32, minutes uint64, weekDays uint8, monthDays, negMonthDays uint32,
	months uint16, occDay uint8, occ int8) *job.Schedule {
	s := &job.Schedule{Hours: maskList(uint64(hours), 24, 0), Minutes: maskList(minutes, 60, 0)}
	switch f {
	case job.Week:
		for _, d := range maskList(uint64(weekDays), 7, 0) {
			s.WeekDays = append(s.WeekDays, job.Weekday(d))
		}
	case job.Month, job.Year:
		s.MonthDays = append(maskList(uint64(monthDays>>1), 31, 1), negate(maskList(uint64(negMonthDays>>1), 31, 1))...)
		s.Months = maskList(uint64(months>>1), 12, 1)
		if occDay&8 != 0 {
			s.MonthlyOccurrences = []job.MonthlyOccurrence{{Day: job.Weekday(occDay % 7), Occurrence: int(occ % 6)}}
		}
	}
	if len(s.Hours)+len(s.Minutes)+len(s.WeekDays)+len(s.MonthDays)+len(s.Months)+len(s.MonthlyOccurrences) == 0 {
		return nil
	}
	return s
}

// maskList lists base+i for every set bit i < n.
func maskList(mask uint64, n int, base int) job.IntList {
	var out job.IntList
	for mask &= 1<<n - 1; mask != 0; mask &= mask - 1 {
		out = append(out, base+bits.TrailingZeros64(mask))
	}
	return out
}

func negate(l job.IntList) job.IntList {
	for i := range l {
		l[i] = -l[i]
	}
	return l
}
