package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a span of time in the form a client wrote it: .NET TimeSpan text ("00:00:30",
// "1.02:03:04") or an ISO 8601 duration ("PT30S", "PT1D", "P1DT2H"). The documents and the
// swagger say ISO 8601 while the service itself and older clients used TimeSpan (reference,
// section 3.9); clients generated from the swagger (Python's azure-mgmt-scheduler) cannot read
// TimeSpan back, and others compare what they get with what they sent. So a duration is
// written in the form it was read in: ISO 8601 as ISO 8601, anything else as TimeSpan.
type Duration struct {
	span time.Duration
	iso  bool // read as ISO 8601, so written so
}

// DurationOf is d written as TimeSpan text.
func DurationOf(d time.Duration) Duration { return Duration{span: d} }

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return d.span }

const durationForms = "write a .NET TimeSpan such as 00:00:30 or 1.02:03:04, or an ISO 8601 duration such as PT30S or P1DT2H"

// ParseDuration reads a TimeSpan text ([d.]hh:mm[:ss[.fffffff]]) or an ISO 8601 duration
// (PnWnDTnHnMnS, with a fraction on the seconds). Years and months are refused: they have no
// fixed length. Negative durations are refused.
func ParseDuration(s string) (Duration, error) {
	var (
		d   time.Duration
		err error
	)
	iso := false
	switch {
	case s == "":
		err = errors.New("empty")
	case s[0] == '-':
		err = errors.New("must not be negative")
	case s[0] == 'P' || s[0] == 'p':
		iso = true
		d, err = parseISODuration(s[1:])
	case strings.Contains(s, ":"):
		d, err = parseTimeSpan(s)
	default:
		err = errors.New("not a duration")
	}
	if err != nil {
		return Duration{}, fmt.Errorf("invalid duration %q: %v (%s)", s, err, durationForms)
	}
	return Duration{span: d, iso: iso}, nil
}

// parseISODuration reads what follows the P of an ISO 8601 duration.
func parseISODuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("nothing after P")
	}
	var total time.Duration
	inTime, last := false, ""
	for s != "" {
		if s[0] == 'T' || s[0] == 't' {
			if inTime {
				return 0, errors.New("T given twice")
			}
			inTime, s = true, s[1:]
			if s == "" {
				return 0, errors.New("nothing after T")
			}
			continue
		}
		n := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != ',' })
		if n < 0 {
			return 0, fmt.Errorf("number %q has no unit", s)
		}
		if n == 0 {
			return 0, fmt.Errorf("expected a number at %q", s)
		}
		num, unit := strings.ReplaceAll(s[:n], ",", "."), strings.ToUpper(s[n:n+1])
		s = s[n+1:]
		scale, err := isoUnit(unit, inTime, &last)
		if err != nil {
			return 0, err
		}
		if strings.Contains(num, ".") && (unit != "S" || s != "") {
			return 0, errors.New("a fraction is allowed only on the seconds")
		}
		v, err := scaleNumber(num, scale)
		if err != nil {
			return 0, err
		}
		if total > math.MaxInt64-v {
			return 0, errors.New("too long")
		}
		total += v
	}
	return total, nil
}

// isoUnit returns the length of an ISO 8601 unit and checks that units come in order.
func isoUnit(unit string, inTime bool, last *string) (time.Duration, error) {
	order := "WD"
	units := map[string]time.Duration{"W": 7 * 24 * time.Hour, "D": 24 * time.Hour}
	if inTime {
		// D after T is not ISO 8601, but the documents' own example is "PT1D".
		order = "DHMS"
		units = map[string]time.Duration{"D": 24 * time.Hour, "H": time.Hour, "M": time.Minute, "S": time.Second}
	}
	scale, ok := units[unit]
	switch {
	case !inTime && (unit == "Y" || unit == "M"):
		return 0, errors.New("years and months have no fixed length; use weeks or days (P30D)")
	case !ok && inTime:
		return 0, fmt.Errorf("unknown unit %q after T (use H, M or S)", unit)
	case !ok:
		return 0, fmt.Errorf("unknown unit %q before T (use W or D, or T for hours, minutes and seconds)", unit)
	case *last != "" && strings.Index(order, unit) <= strings.Index(order, *last):
		return 0, fmt.Errorf("unit %q out of order or repeated", unit)
	}
	*last = unit
	return scale, nil
}

// scaleNumber returns num (digits, optionally with a fraction) times scale, refusing overflow.
func scaleNumber(num string, scale time.Duration) (time.Duration, error) {
	whole, frac, _ := strings.Cut(num, ".")
	if whole == "" || strings.Contains(frac, ".") {
		return 0, fmt.Errorf("bad number %q", num)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/int64(scale) {
		return 0, errors.New("too long")
	}
	v := time.Duration(w) * scale
	if frac != "" {
		f, err := fraction(frac)
		if err != nil {
			return 0, err
		}
		v += f
	}
	return v, nil
}

// fraction reads the digits after a decimal point as a fraction of a second, to the
// nanosecond; further digits are dropped.
func fraction(digits string) (time.Duration, error) {
	if digits == "" {
		return 0, errors.New("expected digits after the decimal point")
	}
	var ns time.Duration
	for i, c := range digits {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("bad fraction %q", digits)
		}
		if i < 9 {
			ns += time.Duration(c-'0') * time.Duration(math.Pow10(8-i))
		}
	}
	return ns, nil
}

// parseTimeSpan reads [d.]hh:mm[:ss[.fffffff]], the form of .NET TimeSpan.Parse; digits past
// the seventh are dropped.
func parseTimeSpan(s string) (time.Duration, error) {
	var days int64
	rest := s
	if dot, colon := strings.IndexByte(s, '.'), strings.IndexByte(s, ':'); dot >= 0 && dot < colon {
		n, err := strconv.ParseInt(s[:dot], 10, 64)
		if err != nil || n < 0 || strings.ContainsAny(s[:dot], "+-") {
			return 0, fmt.Errorf("bad day count %q", s[:dot])
		}
		if n > math.MaxInt64/int64(24*time.Hour)-1 {
			return 0, errors.New("too long")
		}
		days, rest = n, s[dot+1:]
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return 0, errors.New("too many colons")
	}
	secText, frac, hasFrac := "0", "", false
	if len(parts) == 3 {
		secText, frac, hasFrac = strings.Cut(parts[2], ".")
	}
	fields := []struct {
		text string
		max  int
		unit time.Duration
	}{{parts[0], 23, time.Hour}, {parts[1], 59, time.Minute}, {secText, 59, time.Second}}
	d := time.Duration(days) * 24 * time.Hour
	for _, f := range fields {
		if len(f.text) < 1 || len(f.text) > 2 || strings.Trim(f.text, "0123456789") != "" {
			return 0, fmt.Errorf("expected one or two digits, got %q", f.text)
		}
		v, _ := strconv.Atoi(f.text)
		if v > f.max {
			return 0, fmt.Errorf("%q is out of range (hours 0-23, minutes and seconds 0-59)", f.text)
		}
		d += time.Duration(v) * f.unit
	}
	if hasFrac {
		f, err := fraction(frac)
		if err != nil {
			return 0, err
		}
		// To the tick (100 ns), as .NET keeps it and as TimeSpan writes it back: a duration
		// read this way is written as it was read.
		d += f.Truncate(100)
	}
	return d, nil
}

// String returns the duration in the form it was read in: ISO 8601 (ISO) or TimeSpan text
// (TimeSpan).
func (d Duration) String() string {
	if d.iso {
		return d.ISO()
	}
	return d.TimeSpan()
}

// TimeSpan returns the TimeSpan text: hh:mm:ss, d.hh:mm:ss from one day on, and seven
// fraction digits (100 ns ticks, as .NET writes them) when the span is not whole seconds.
func (d Duration) TimeSpan() string {
	t := d.span
	sign := ""
	if t < 0 {
		sign, t = "-", -t
	}
	days := t / (24 * time.Hour)
	t -= days * 24 * time.Hour
	h, m, s := t/time.Hour, t%time.Hour/time.Minute, t%time.Minute/time.Second
	out := fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	if days > 0 {
		out = fmt.Sprintf("%d.%s", days, out)
	}
	if ticks := t % time.Second / 100; ticks != 0 {
		out += fmt.Sprintf(".%07d", ticks)
	}
	return sign + out
}

// ISO returns the ISO 8601 duration: days, then hours, minutes and seconds after the T, each
// only when not zero (PT0S for none), and the fraction of a second without trailing zeros.
func (d Duration) ISO() string {
	t, sign := d.span, ""
	if t < 0 {
		sign, t = "-", -t
	}
	days := t / (24 * time.Hour)
	t -= days * 24 * time.Hour
	out := sign + "P"
	if days > 0 {
		out += fmt.Sprintf("%dD", days)
		if t == 0 {
			return out
		}
	}
	out += "T"
	if h := t / time.Hour; h > 0 {
		out += fmt.Sprintf("%dH", h)
	}
	if m := t % time.Hour / time.Minute; m > 0 {
		out += fmt.Sprintf("%dM", m)
	}
	if s, frac := t%time.Minute/time.Second, t%time.Second; s > 0 || frac > 0 || t == 0 {
		out += fmt.Sprintf("%d", s)
		if frac > 0 {
			out += strings.TrimRight(fmt.Sprintf(".%09d", frac), "0")
		}
		out += "S"
	}
	return out
}

// MarshalJSON writes the text String gives.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a JSON string with ParseDuration.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string (%s): %w", durationForms, err)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
