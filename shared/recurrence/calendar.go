package recurrence

import (
	"math/bits"
	"slices"
	"time"

	"github.com/resched/resched/shared/job"
)

// calendar expands Day, Week, Month and Year recurrences: periods of whole calendar units in
// the job's zone, days chosen inside each period, and times of day on each chosen day.
type calendar struct {
	freq     job.Frequency
	interval int64
	anchor   int64   // the period that holds A: day number, ISO week, month index (12·y+m-1) or year
	tods     []int64 // sorted wall-clock seconds of the day at which a chosen day runs
	weekdays uint8   // Week: bit i set when Monday+i runs
	months   uint16  // Month, Year: bit m set when month m runs
	// days[n-28][w] has bit d set when day d runs in a month of n days whose 1st is weekday w.
	// Precomputing the 28 cases makes monthDays, negative days and monthlyOccurrences one lookup.
	days [4][7]uint32
}

func newCalendar(freq job.Frequency, interval int64, sch *job.Schedule, anchorWall int64) calendar {
	aDay := floorDiv(anchorWall, secondsPerDay)
	sod := anchorWall - aDay*secondsPerDay
	y, m, d := civilFromDays(aDay)
	k := calendar{freq: freq, interval: interval}
	switch freq {
	case job.Day:
		k.anchor = aDay
	case job.Week:
		k.anchor = isoWeekOf(aDay)
		k.weekdays = weekdayMask(sch.WeekDays, weekdayOf(aDay))
	case job.Month:
		k.anchor = y*12 + int64(m) - 1
		k.months = monthMask(sch.Months, 0)
		k.days = dayMasks(sch, d)
	case job.Year:
		k.anchor = y
		k.months = monthMask(sch.Months, m)
		k.days = dayMasks(sch, d)
	}
	k.tods = timesOfDay(sch, int(sod/3600), int(sod/60%60), sod%60)
	return k
}

// timesOfDay is hours × minutes at A's second. Minutes default to A's minute; hours default to
// A's hour, or to every hour when minutes are given (docs/recurrence.md §6).
func timesOfDay(sch *job.Schedule, aHour, aMinute int, aSecond int64) []int64 {
	minutes, hours := []int(sch.Minutes), []int(sch.Hours)
	if len(minutes) == 0 {
		minutes = []int{aMinute}
		if len(hours) == 0 {
			hours = []int{aHour}
		}
	}
	if len(hours) == 0 {
		hours = make([]int, 24)
		for h := range hours {
			hours[h] = h
		}
	}
	tods := make([]int64, 0, len(hours)*len(minutes))
	for _, h := range hours {
		for _, mi := range minutes {
			tods = append(tods, int64(h*3600+mi*60)+aSecond)
		}
	}
	slices.Sort(tods)
	return slices.Compact(tods)
}

func weekdayMask(days []job.Weekday, aWeekday int) uint8 {
	if len(days) == 0 {
		return 1 << ((aWeekday + 6) % 7)
	}
	var mask uint8
	for _, wd := range days {
		mask |= 1 << ((int(wd) + 6) % 7)
	}
	return mask
}

func monthMask(months []int, aMonth time.Month) uint16 {
	switch {
	case len(months) > 0:
		var mask uint16
		for _, m := range months {
			mask |= 1 << m
		}
		return mask
	case aMonth != 0:
		return 1 << aMonth
	}
	return 0x1ffe // every month
}

// dayMasks takes the union of monthDays and monthlyOccurrences, or A's day of the month when
// neither is given, for each month length and weekday of the 1st. Days a month lacks drop out.
func dayMasks(sch *job.Schedule, aDay int) (masks [4][7]uint32) {
	monthDays := []int(sch.MonthDays)
	if len(monthDays) == 0 && len(sch.MonthlyOccurrences) == 0 {
		monthDays = []int{aDay}
	}
	for n := 28; n <= 31; n++ {
		for first := 0; first < 7; first++ {
			var mask uint32
			for _, md := range monthDays {
				if md < 0 {
					md += n + 1
				}
				if md >= 1 && md <= n {
					mask |= 1 << md
				}
			}
			for _, o := range sch.MonthlyOccurrences {
				mask |= occurrenceMask(o, n, first)
			}
			masks[n-28][first] = mask
		}
	}
	return masks
}

// occurrenceMask marks the days of the n-day month whose 1st is weekday `first` that are the
// o.Occurrence-th o.Day (from the end when negative; every one when zero).
func occurrenceMask(o job.MonthlyOccurrence, n, first int) uint32 {
	var all []int
	for d := 1 + (int(o.Day)-first+7)%7; d <= n; d += 7 {
		all = append(all, d)
	}
	var mask uint32
	switch occ := o.Occurrence; {
	case occ == 0:
		for _, d := range all {
			mask |= 1 << d
		}
	case occ > 0 && occ <= len(all):
		mask = 1 << all[occ-1]
	case occ < 0 && -occ <= len(all):
		mask = 1 << all[len(all)+occ]
	}
	return mask
}

// next returns the earliest instant after `after` and not after bound.
//
// Wall times are visited in order, but near a DST change their instants are not monotonic (a
// time in the spring gap maps past the times just after it), so the search keeps the best
// instant found and stops only once no later wall time can map before it.
func (k *calendar) next(z *zone, after, bound int64) (int64, bool) {
	c := z.cursor(after)
	lo, _ := c.offsetRange(after)
	from := after + lo // no wall time at or before this maps after `after`
	best, stop := never, bound+secondsPerDay
	for day := floorDiv(from, secondsPerDay); ; day++ {
		if day = k.nextDay(day, floorDiv(stop-1, secondsPerDay)); day == never {
			break
		}
		base := day * secondsPerDay
		i := 0
		if base <= from {
			i, _ = slices.BinarySearch(k.tods, from-base+1)
		}
		for _, tod := range k.tods[i:] {
			w := base + tod
			if w >= stop {
				break
			}
			if t := c.resolve(w); t > after && t < best {
				_, hi := c.offsetRange(t)
				best, stop = t, min(stop, t+hi)
			}
		}
	}
	return best, best <= bound
}

// nextDay returns the first day on or after `day` that runs, or never when there is none up
// to `last`.
func (k *calendar) nextDay(day, last int64) int64 {
	switch k.freq {
	case job.Day:
		if day < k.anchor {
			day = k.anchor
		} else if r := (day - k.anchor) % k.interval; r != 0 {
			day += k.interval - r
		}
	case job.Week:
		day = k.nextWeekDay(day, last)
	default:
		day = k.nextMonthDay(day, last)
	}
	if day > last {
		return never
	}
	return day
}

func (k *calendar) nextWeekDay(day, last int64) int64 {
	for day <= last {
		w := isoWeekOf(day)
		if w < k.anchor {
			day = mondayOf(k.anchor)
			continue
		}
		if r := (w - k.anchor) % k.interval; r != 0 {
			day = mondayOf(w + k.interval - r)
			continue
		}
		if rest := k.weekdays >> floorMod(day+3, 7); rest != 0 {
			return day + int64(bits.TrailingZeros8(rest))
		}
		day = mondayOf(w + k.interval)
	}
	return day
}

func (k *calendar) nextMonthDay(day, last int64) int64 {
	y, m, d := civilFromDays(day)
	mi := y*12 + int64(m) - 1
	for {
		next, ok := k.nextMonth(mi)
		if !ok {
			return never
		}
		if next != mi {
			mi, d = next, 1
		}
		y, m := floorDiv(mi, 12), time.Month(floorMod(mi, 12)+1)
		first := daysFromCivil(y, m, 1)
		if first > last {
			return never
		}
		mask := k.days[daysIn(y, m)-28][weekdayOf(first)] >> d << d
		if mask != 0 {
			return first + int64(bits.TrailingZeros32(mask)) - 1
		}
		mi, d = mi+1, 1
	}
}

// nextMonth returns the first month index at or after mi that is in a running period and
// passes the months filter; false when no month ever does.
func (k *calendar) nextMonth(mi int64) (int64, bool) {
	if k.freq == job.Year {
		y, mo := floorDiv(mi, 12), floorMod(mi, 12)+1
		if y < k.anchor {
			y, mo = k.anchor, 1
		} else if r := (y - k.anchor) % k.interval; r != 0 {
			y, mo = y+k.interval-r, 1
		}
		if rest := k.months >> mo; rest != 0 {
			return y*12 + mo + int64(bits.TrailingZeros16(rest)) - 1, true
		}
		return (y+k.interval)*12 + int64(bits.TrailingZeros16(k.months)) - 1, true
	}
	if mi < k.anchor {
		mi = k.anchor
	} else if r := (mi - k.anchor) % k.interval; r != 0 {
		mi += k.interval - r
	}
	// Twelve steps of the interval visit every month of the year that the series can ever reach.
	for range 12 {
		if k.months>>(floorMod(mi, 12)+1)&1 != 0 {
			return mi, true
		}
		mi += k.interval
	}
	return 0, false
}
