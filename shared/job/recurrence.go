package job

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Frequency is the unit of a recurrence. The zero value means "not set".
type Frequency int

// The frequencies of docs/recurrence.md §3. Second and Year are extensions (Logic Apps, the docs).
const (
	Second Frequency = iota + 1
	Minute
	Hour
	Day
	Week
	Month
	Year
)

var frequencyNames = [...]string{"", "Second", "Minute", "Hour", "Day", "Week", "Month", "Year"}

// ParseFrequency matches a frequency name case-insensitively.
func ParseFrequency(s string) (Frequency, error) {
	for f := Second; f <= Year; f++ {
		if strings.EqualFold(s, frequencyNames[f]) {
			return f, nil
		}
	}
	return 0, fmt.Errorf("unknown frequency %q: must be one of Second, Minute, Hour, Day, Week, Month, Year", s)
}

// String returns the canonical name ("Week"), or "" when unset.
func (f Frequency) String() string {
	if f < 0 || int(f) >= len(frequencyNames) {
		return fmt.Sprintf("Frequency(%d)", int(f))
	}
	return frequencyNames[f]
}

// MarshalJSON writes the canonical name.
func (f Frequency) MarshalJSON() ([]byte, error) {
	if f == 0 {
		return []byte("null"), nil
	}
	return []byte(`"` + f.String() + `"`), nil // a name of letters: nothing to escape
}

// UnmarshalJSON reads a name case-insensitively.
func (f *Frequency) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(b, ParseFrequency, f)
}

// Weekday numbers days as time.Weekday does (Sunday = 0).
type Weekday int

var weekdayNames = [...]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

// ParseWeekday matches a day name case-insensitively.
func ParseWeekday(s string) (Weekday, error) {
	for i, n := range weekdayNames {
		if strings.EqualFold(s, n) {
			return Weekday(i), nil
		}
	}
	return 0, fmt.Errorf("unknown weekday %q: must be one of Monday … Sunday", s)
}

// String returns the English name.
func (w Weekday) String() string {
	if w < 0 || int(w) >= len(weekdayNames) {
		return fmt.Sprintf("Weekday(%d)", int(w))
	}
	return weekdayNames[w]
}

// MarshalJSON writes the English name.
func (w Weekday) MarshalJSON() ([]byte, error) { return json.Marshal(w.String()) }

// UnmarshalJSON reads a name case-insensitively.
func (w *Weekday) UnmarshalJSON(b []byte) error {
	return unmarshalEnum(b, ParseWeekday, w)
}

// IntList is a list of integers that also accepts a single number, as the original documents
// allow ("hours": 5 is [5]).
type IntList []int

// UnmarshalJSON accepts an array of integers or one integer.
func (l *IntList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '[' && !bytes.Equal(b, []byte("null")) {
		var n int
		if err := json.Unmarshal(b, &n); err != nil {
			return err
		}
		*l = IntList{n}
		return nil
	}
	var v []int
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = v
	return nil
}

// Recurrence says how a job repeats (docs/recurrence.md). Absent on a one-time job.
type Recurrence struct {
	Frequency Frequency `json:"frequency"`
	Interval  int       `json:"interval,omitempty"` // 0 means the default, 1
	Count     int       `json:"count,omitempty"`    // 0 means unbounded
	EndTime   *DateTime `json:"endTime,omitempty"`
	Schedule  *Schedule `json:"schedule,omitempty"`
	TimeZone  string    `json:"timeZone,omitempty"` // IANA or Windows name; empty means UTC
	// CatchUpPolicy (an extension) overrides the deployment's policy for occurrences missed
	// while every planner was down; empty: the deployment's.
	CatchUpPolicy CatchUpPolicy `json:"catchUpPolicy,omitempty"`
}

// CatchUpPolicy says what runs of the occurrences that fell due while every planner was down
// (docs/architecture.md, "Catch-up"). Occurrences more than the catch-up window late never run.
type CatchUpPolicy string

// The catch-up policies.
const (
	// CatchUpLatest runs only the latest of them (Azure Scheduler's behaviour).
	CatchUpLatest CatchUpPolicy = "Latest"
	// CatchUpAll runs every one of them, in order, at a bounded rate.
	CatchUpAll CatchUpPolicy = "All"
)

var catchUpPolicies = []CatchUpPolicy{CatchUpLatest, CatchUpAll}

// ParseCatchUpPolicy matches a policy case-insensitively.
func ParseCatchUpPolicy(s string) (CatchUpPolicy, error) {
	return parseName("catch-up policy", s, catchUpPolicies)
}

// UnmarshalJSON reads a policy case-insensitively.
func (p *CatchUpPolicy) UnmarshalJSON(b []byte) error { return unmarshalEnum(b, ParseCatchUpPolicy, p) }

// IntervalOrDefault returns the interval, 1 when it was not given.
func (r *Recurrence) IntervalOrDefault() int {
	if r == nil || r.Interval == 0 {
		return 1
	}
	return r.Interval
}

// Schedule narrows or widens the times inside each period (docs/recurrence.md §6).
type Schedule struct {
	Minutes            IntList             `json:"minutes,omitempty"`
	Hours              IntList             `json:"hours,omitempty"`
	WeekDays           []Weekday           `json:"weekDays,omitempty"`
	MonthDays          IntList             `json:"monthDays,omitempty"`
	MonthlyOccurrences []MonthlyOccurrence `json:"monthlyOccurrences,omitempty"`
	Months             IntList             `json:"months,omitempty"`
}

// MonthlyOccurrence is "the n-th such weekday of the month" (n < 0 counts from the end), or
// every such weekday when Occurrence is 0. The swagger spells the field "Occurrence"; JSON
// field names match case-insensitively, so both spellings land here.
type MonthlyOccurrence struct {
	Day        Weekday `json:"day"`
	Occurrence int     `json:"occurrence,omitempty"`
}

func unmarshalEnum[T any](b []byte, parse func(string) (T, error), dst *T) error {
	s, err := jsonString(b)
	if err != nil {
		return fmt.Errorf("must be a string: %w", err)
	}
	v, err := parse(s)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// jsonString reads a JSON string. Names and date-times are plain ASCII without escapes, and
// taking those between their quotes spares a nested json.Unmarshal: the planner decodes a
// schedule on every fire of a job it has not compiled yet.
func jsonString(b []byte) (string, error) {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		plain := true
		for _, c := range b[1 : len(b)-1] {
			if c == '\\' || c == '"' || c < 0x20 || c >= 0x80 {
				plain = false
				break
			}
		}
		if plain {
			return string(b[1 : len(b)-1]), nil
		}
	}
	var s string
	err := json.Unmarshal(b, &s)
	return s, err
}
