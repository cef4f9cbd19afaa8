package recurrence

import "time"

// Wall-clock times are kept as "pseudo-UTC" seconds: the seconds since 1970-01-01T00:00:00 that
// the wall clock would show if it were UTC. Days are whole days since 1970-01-01. Working on
// integers keeps Next free of allocations and of time.Date's own gap/overlap choices.

const (
	secondsPerDay = 86400
	never         = int64(1<<63 - 1) // larger than every real time
)

// daysFromCivil converts a proleptic Gregorian date to days since 1970-01-01
// (Howard Hinnant's algorithm, valid for every year an int64 can hold here).
func daysFromCivil(y int64, m time.Month, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := (int64(m) + 9) % 12
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y int64, m time.Month, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = time.Month(mp + 3)
	} else {
		m = time.Month(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// weekdayOf returns the weekday of a day number, Sunday = 0 as in time.Weekday.
func weekdayOf(day int64) int { return int(floorMod(day+4, 7)) }

// isoWeekOf numbers Monday-started weeks; week 0 starts on Monday 1969-12-29.
func isoWeekOf(day int64) int64 { return floorDiv(day+3, 7) }

// mondayOf returns the first day of an isoWeekOf week.
func mondayOf(week int64) int64 { return week*7 - 3 }

func daysIn(y int64, m time.Month) int {
	switch m {
	case time.February:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// ceilDiv rounds a/b up, for b > 0.
func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }
