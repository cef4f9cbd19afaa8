package job

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// Definition is a job resource: the read-only identity and the properties a client sets.
type Definition struct {
	ID         string     `json:"id,omitempty"`   // read-only
	Type       string     `json:"type,omitempty"` // read-only
	Name       string     `json:"name,omitempty"` // read-only (taken from the subject)
	Properties Properties `json:"properties"`
}

// Properties is what a job does and when.
type Properties struct {
	StartTime  *DateTime   `json:"startTime,omitempty"`  // absent: now
	Action     *Action     `json:"action,omitempty"`     // required at intake
	Recurrence *Recurrence `json:"recurrence,omitempty"` // absent: a one-time job
	State      State       `json:"state,omitempty"`      // absent: Enabled
	Status     *Status     `json:"status,omitempty"`     // read-only, kept by the planner
}

// State is the life-cycle state of a job. Clients may set only Enabled and Disabled;
// Completed and Faulted are final and set by the scheduler.
type State string

// The job states.
const (
	StateEnabled   State = "Enabled"
	StateDisabled  State = "Disabled"
	StateCompleted State = "Completed"
	StateFaulted   State = "Faulted"
)

var jobStates = []State{StateEnabled, StateDisabled, StateCompleted, StateFaulted}

// ParseState matches a job state case-insensitively.
func ParseState(s string) (State, error) { return parseName("job state", s, jobStates) }

// UnmarshalJSON reads a state case-insensitively.
func (s *State) UnmarshalJSON(b []byte) error { return unmarshalEnum(b, ParseState, s) }

// ClientSettable reports whether a client may put the job in this state ("" means the
// default, Enabled).
func (s State) ClientSettable() bool {
	return s == "" || s == StateEnabled || s == StateDisabled
}

// DecodeDefinition reads a job given either as the whole resource {"properties": {...}} or as
// the properties object alone. It checks nothing beyond JSON types; untrusted input goes
// through package jobschema instead.
func DecodeDefinition(b []byte) (*Definition, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return nil, fmt.Errorf("decode job: %w", err)
	}
	var d Definition
	if hasKeyFold(keys, "properties") {
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("decode job resource: %w", err)
		}
		return &d, nil
	}
	if err := json.Unmarshal(b, &d.Properties); err != nil {
		return nil, fmt.Errorf("decode job properties: %w", err)
	}
	return &d, nil
}

func hasKeyFold(m map[string]json.RawMessage, key string) bool {
	for k := range m {
		if strings.EqualFold(k, key) {
			return true
		}
	}
	return false
}

// Redacted returns a deep copy with every secret cleared, fit to return to a client or to log.
func (d *Definition) Redacted() *Definition {
	if d == nil {
		return nil
	}
	c := *d
	c.Properties = *d.Properties.Redacted()
	return &c
}

// Redacted returns a deep copy with every secret cleared.
func (p *Properties) Redacted() *Properties {
	if p == nil {
		return nil
	}
	c := *p
	if p.StartTime != nil {
		t := *p.StartTime
		c.StartTime = &t
	}
	c.Action = p.Action.Redacted()
	c.Recurrence = cloneRecurrence(p.Recurrence)
	if p.Status != nil {
		s := p.Status.clone()
		c.Status = &s
	}
	return &c
}

// String returns the JSON of the redacted definition.
func (d Definition) String() string { return redactedJSON(d.Redacted()) }

// LogValue logs the redacted definition as JSON.
func (d Definition) LogValue() slog.Value { return jsonLogValue(d.Redacted()) }

// String returns the JSON of the redacted properties.
func (p Properties) String() string { return redactedJSON(p.Redacted()) }

// LogValue logs the redacted properties as JSON.
func (p Properties) LogValue() slog.Value { return jsonLogValue(p.Redacted()) }

// cloneRecurrence copies a recurrence so that a redacted copy shares no memory with the
// original; a struct copy carries every value field, only pointers and slices need care.
func cloneRecurrence(r *Recurrence) *Recurrence {
	if r == nil {
		return nil
	}
	c := *r
	if r.EndTime != nil {
		t := *r.EndTime
		c.EndTime = &t
	}
	if r.Schedule != nil {
		s := *r.Schedule
		s.Minutes = slices.Clone(s.Minutes)
		s.Hours = slices.Clone(s.Hours)
		s.WeekDays = slices.Clone(s.WeekDays)
		s.MonthDays = slices.Clone(s.MonthDays)
		s.MonthlyOccurrences = slices.Clone(s.MonthlyOccurrences)
		s.Months = slices.Clone(s.Months)
		c.Schedule = &s
	}
	return &c
}

// redactedJSON marshals an already redacted value; the model has no type that fails to
// marshal, so an error can only mean a programming mistake and is shown as such.
func redactedJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("!(%T: %v)", v, err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// jsonLogValue logs JSON as JSON with slog's JSON handler (a json.RawMessage is embedded as
// is) and as a quoted string with the text handler.
func jsonLogValue(v any) slog.Value {
	return slog.AnyValue(json.RawMessage(redactedJSON(v)))
}
