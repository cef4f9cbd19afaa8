package job

import (
	"fmt"
	"strconv"
	"time"
)

// DateTime is a time text as the user wrote it: wall-clock fields and, when given, an offset.
//
// It is not a time.Time because a startTime without an offset means wall time in the job's
// time zone, which may not exist (spring forward) or may occur twice (fall back); only the
// recurrence engine, which knows the zone and the rules of docs/recurrence.md §2, may turn it into
// an instant.
type DateTime struct {
	Year                 int
	Month                time.Month
	Day                  int
	Hour, Minute, Second int
	// Nanosecond is the fraction of the second as written (".5" is 500,000,000). The engine
	// works in whole seconds: a start with a fraction begins at the next whole second, so no
	// execution comes before the instant asked for (docs/recurrence.md §2).
	Nanosecond int
	DateOnly   bool // "2012-11-04": a date alone, 00:00:00 of that day
	HasOffset  bool // "Z" or "±hh:mm" was given: an absolute instant
	Offset     int  // seconds east of UTC, when HasOffset
}

// ParseDateTime reads the time texts of docs/recurrence.md §2: a date (2012-08-04), optionally
// followed by T and hh:mm or hh:mm:ss, an optional fraction of any length (kept to the
// nanosecond), then Z, ±hh:mm or nothing. T and Z may be lower case.
func ParseDateTime(s string) (DateTime, error) {
	var d DateTime
	p := dtParser{s: s}
	d.Year = p.digits(4)
	p.expect('-')
	d.Month = time.Month(p.digits(2))
	p.expect('-')
	d.Day = p.digits(2)
	if p.err == nil && p.done() {
		d.DateOnly = true
		return d, d.check(s)
	}
	if !p.accept('T') && !p.accept('t') {
		p.fail("expected 'T' after the date")
	}
	d.Hour = p.digits(2)
	p.expect(':')
	d.Minute = p.digits(2)
	if p.accept(':') {
		d.Second = p.digits(2)
		if p.accept('.') || p.accept(',') {
			n, digits := p.fraction()
			if digits == 0 {
				p.fail("expected digits after the decimal point")
			}
			d.Nanosecond = n
		}
	}
	switch {
	case p.err != nil, p.done():
	case p.accept('Z'), p.accept('z'):
		d.HasOffset = true
	case p.peek() == '+' || p.peek() == '-':
		sign := 1
		if p.next() == '-' {
			sign = -1
		}
		hh := p.digits(2)
		p.expect(':')
		mm := p.digits(2)
		if p.err == nil && (hh > 23 || mm > 59) {
			p.fail("offset out of range")
		}
		d.HasOffset, d.Offset = true, sign*(hh*3600+mm*60)
	default:
		p.fail("expected Z, an offset ±hh:mm or the end")
	}
	if p.err == nil && !p.done() {
		p.fail("unexpected text after the time")
	}
	if p.err != nil {
		return DateTime{}, p.err
	}
	return d, d.check(s)
}

// check verifies the calendar fields once the syntax is known to be right.
func (d DateTime) check(s string) error {
	switch {
	case d.Year < 1:
		return dtError(s, "year must be 0001 or later")
	case d.Month < 1 || d.Month > 12:
		return dtError(s, "month must be 01 to 12")
	case d.Day < 1 || d.Day > DaysIn(d.Year, d.Month):
		return dtError(s, fmt.Sprintf("day must be 01 to %02d in that month", DaysIn(d.Year, d.Month)))
	case d.Hour > 23:
		return dtError(s, "hour must be 00 to 23")
	case d.Minute > 59:
		return dtError(s, "minute must be 00 to 59")
	case d.Second > 59:
		return dtError(s, "second must be 00 to 59")
	}
	return nil
}

// DaysIn returns the number of days of a month in the proleptic Gregorian calendar.
func DaysIn(year int, m time.Month) int {
	switch m {
	case time.February:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

// String returns the canonical text: a date alone, or yyyy-mm-ddThh:mm:ss followed by Z or
// ±hh:mm when an offset was given.
func (d DateTime) String() string {
	return string(d.appendText(make([]byte, 0, len("2006-01-02T15:04:05.999999999+07:00"))))
}

// appendText appends the canonical text without fmt: every job answered or stored writes its
// times, and fmt's formatting was the larger part of that.
func (d DateTime) appendText(b []byte) []byte {
	b = appendPadded(b, d.Year, 4)
	b = appendPadded(append(b, '-'), int(d.Month), 2)
	b = appendPadded(append(b, '-'), d.Day, 2)
	if d.DateOnly {
		return b
	}
	b = appendPadded(append(b, 'T'), d.Hour, 2)
	b = appendPadded(append(b, ':'), d.Minute, 2)
	b = appendPadded(append(b, ':'), d.Second, 2)
	if d.Nanosecond != 0 {
		b = appendPadded(append(b, '.'), d.Nanosecond, 9)
		for b[len(b)-1] == '0' {
			b = b[:len(b)-1]
		}
	}
	switch {
	case !d.HasOffset:
		return b
	case d.Offset == 0:
		return append(b, 'Z')
	}
	sign, off := byte('+'), d.Offset
	if off < 0 {
		sign, off = '-', -off
	}
	b = appendPadded(append(b, sign), off/3600, 2)
	return appendPadded(append(b, ':'), off%3600/60, 2)
}

// appendPadded appends n in decimal with leading zeros up to width digits, as fmt's %0*d.
func appendPadded(b []byte, n, width int) []byte {
	if n < 0 {
		return fmt.Appendf(b, "%0*d", width, n)
	}
	for digits, p := 1, 10; digits < width; digits, p = digits+1, p*10 {
		if n < p { // n has at most this many digits: one more zero in front
			b = append(b, '0')
		}
	}
	return strconv.AppendInt(b, int64(n), 10)
}

// DateTimeOf returns the DateTime of an instant, in UTC, with the Z offset.
func DateTimeOf(t time.Time) DateTime {
	t = t.UTC()
	return DateTime{
		Year: t.Year(), Month: t.Month(), Day: t.Day(),
		Hour: t.Hour(), Minute: t.Minute(), Second: t.Second(), Nanosecond: t.Nanosecond(),
		HasOffset: true,
	}
}

// UTC returns the instant the text names, reading a missing offset as UTC. It is for texts
// outside a job (flags, API parameters); inside a job a missing offset means wall time in the
// job's zone, which only the recurrence engine may resolve.
func (d DateTime) UTC() time.Time {
	t := time.Date(d.Year, d.Month, d.Day, d.Hour, d.Minute, d.Second, d.Nanosecond, time.UTC)
	return t.Add(-time.Duration(d.Offset) * time.Second)
}

// MarshalText writes the canonical text. A text marshaler rather than MarshalJSON: the
// encoder quotes it directly, where MarshalJSON's output went through a second encoder and was
// then checked again.
func (d DateTime) MarshalText() ([]byte, error) {
	return d.appendText(make([]byte, 0, len("2006-01-02T15:04:05.999999999+07:00"))), nil
}

// UnmarshalJSON reads a JSON string with ParseDateTime.
func (d *DateTime) UnmarshalJSON(b []byte) error {
	s, err := jsonString(b)
	if err != nil {
		return fmt.Errorf("a date-time must be a string: %w", err)
	}
	v, err := ParseDateTime(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

func dtError(s, rule string) error {
	return fmt.Errorf("invalid date-time %q: %s", s, rule)
}

// dtParser is a tiny cursor over the text; the first failure sticks.
type dtParser struct {
	s   string
	i   int
	err error
}

func (p *dtParser) done() bool { return p.i >= len(p.s) }

func (p *dtParser) peek() byte {
	if p.err != nil || p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *dtParser) next() byte {
	c := p.peek()
	if c != 0 {
		p.i++
	}
	return c
}

func (p *dtParser) accept(c byte) bool {
	if p.peek() == c && c != 0 {
		p.i++
		return true
	}
	return false
}

func (p *dtParser) expect(c byte) {
	if p.err == nil && !p.accept(c) {
		p.fail(fmt.Sprintf("expected %q at position %d", c, p.i+1))
	}
}

func (p *dtParser) digits(n int) int {
	if p.err != nil {
		return 0
	}
	if p.i+n > len(p.s) {
		p.fail(fmt.Sprintf("expected %d digits at position %d", n, p.i+1))
		return 0
	}
	for _, c := range []byte(p.s[p.i : p.i+n]) {
		if c < '0' || c > '9' {
			p.fail(fmt.Sprintf("expected %d digits at position %d", n, p.i+1))
			return 0
		}
	}
	v, _ := strconv.Atoi(p.s[p.i : p.i+n])
	p.i += n
	return v
}

// fraction reads the digits of a fraction of a second: its value in nanoseconds (digits past
// the ninth are read and dropped) and how many digits there were.
func (p *dtParser) fraction() (nanos, digits int) {
	scale := 100_000_000
	for c := p.peek(); c >= '0' && c <= '9'; c = p.peek() {
		p.i++
		digits++
		nanos += int(c-'0') * scale
		scale /= 10
	}
	return nanos, digits
}

func (p *dtParser) fail(rule string) {
	if p.err == nil {
		p.err = dtError(p.s, rule+" (expected forms: 2012-08-04, 2012-08-04T09:30, 2012-08-04T09:30:00, with an optional fraction and Z or ±hh:mm)")
	}
}
