package recurrence

import (
	"math/bits"
	"slices"

	"github.com/resched/resched/shared/job"
)

// clock expands Second, Minute and Hour recurrences, which step in absolute time: periods of
// `step` seconds from `origin`. A schedule's hours and minutes are compared with each instant's
// wall clock, so a repeated hour matches twice and a skipped hour never.
type clock struct {
	freq    job.Frequency
	step    int64
	origin  int64   // Second, Minute: A itself; Hour: the start of A's wall-clock hour
	second  int64   // Hour: A's second, the second of every time
	minutes []int64 // Hour: sorted minutes (in seconds) that run inside each period
	// wallMinutes: Hour with explicit minutes matches each instant's wall minute; without them
	// the series adds fixed hours to A (docs/recurrence.md §5), even across a 30-minute DST shift.
	wallMinutes bool
	hourSet     uint32 // bit h: wall hour h may run (all set when hours are not given)
	minSet      uint64 // Second, Minute: bit m: wall minute m may run (all set when not given)
}

func newClock(freq job.Frequency, interval int64, sch *job.Schedule, anchorWall, anchorInstant int64) clock {
	k := clock{freq: freq, origin: anchorInstant, hourSet: 1<<24 - 1, minSet: 1<<60 - 1}
	for i, h := range sch.Hours {
		if i == 0 {
			k.hourSet = 0
		}
		k.hourSet |= 1 << h
	}
	switch freq {
	case job.Second:
		k.step = interval
	case job.Minute:
		k.step = interval * 60
	case job.Hour:
		k.step = interval * 3600
		inHour := floorMod(anchorWall, 3600)
		k.origin, k.second = anchorInstant-inHour, inHour%60
		mins := []int(sch.Minutes)
		k.wallMinutes = len(mins) > 0
		if len(mins) == 0 {
			mins = []int{int(inHour / 60)}
		}
		for _, m := range mins {
			k.minutes = append(k.minutes, int64(m)*60)
		}
		slices.Sort(k.minutes)
		k.minutes = slices.Compact(k.minutes)
		return k
	}
	for i, m := range sch.Minutes {
		if i == 0 {
			k.minSet = 0
		}
		k.minSet |= 1 << m
	}
	return k
}

func (k *clock) next(z *zone, after, bound int64) (int64, bool) {
	c := z.cursor(after)
	if k.freq == job.Hour {
		return k.nextHour(&c, after, bound)
	}
	t := k.grid(after + 1)
	for t <= bound {
		w := c.wall(t)
		h, m := floorMod(floorDiv(w, 3600), 24), floorMod(floorDiv(w, 60), 60)
		// A jump computed on today's wall clock is only right while the offset holds: never jump
		// past the end of the current offset span; look again from there instead.
		switch {
		case k.hourSet>>h&1 == 0:
			t = k.grid(min(t-floorMod(w, 3600)+(nextBit(uint64(k.hourSet), h, 24)-h)*3600, c.sp.end))
		case k.minSet>>m&1 == 0:
			t = k.grid(min(t-floorMod(w, 60)+(nextBit(k.minSet, m, 60)-m)*60, c.sp.end))
		default:
			return t, true
		}
	}
	return 0, false
}

// grid returns the first series time at or after t.
func (k *clock) grid(t int64) int64 {
	return k.origin + max(0, ceilDiv(t-k.origin, k.step))*k.step
}

// nextBit returns the next set bit above b in a set of n bits, plus n when it wraps around.
func nextBit(set uint64, b, n int64) int64 {
	if rest := set >> (b + 1); rest != 0 {
		return b + 1 + int64(bits.TrailingZeros64(rest))
	}
	return n + int64(bits.TrailingZeros64(set))
}

// nextHour visits one period (hour) at a time; inside it, each minute is the instant whose wall
// minute it is (normally origin-aligned; a 30-minute DST shift moves the wall minutes).
func (k *clock) nextHour(c *cursor, after, bound int64) (int64, bool) {
	for p := k.origin + max(0, floorDiv(after-k.origin, k.step))*k.step; p <= bound; p += k.step {
		shift := int64(0)
		if k.wallMinutes {
			shift = floorMod(c.wall(p), 3600)
		}
		best := never
		for _, m := range k.minutes {
			t := p + floorMod(m-shift, 3600) + k.second
			if t > after && t < best && k.hourSet>>floorMod(floorDiv(c.wall(t), 3600), 24)&1 != 0 {
				best = t
				if shift == 0 {
					break // minutes are sorted, so the first match is the earliest
				}
			}
		}
		if best != never {
			return best, best <= bound
		}
	}
	return 0, false
}
