package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/recurrence"
)

// The stored form of a job's definition is two compact JSON documents on two lines: the
// schedule ({"startTime", "recurrence"}) and the action (secrets included). Every fire needs
// the schedule decoded but the action only copied into the due message, so keeping them apart
// spares the dispatcher from parsing the action. Compact JSON has no raw newline.
type schedulePart struct {
	StartTime  *job.DateTime   `json:"startTime,omitempty"`
	Recurrence *job.Recurrence `json:"recurrence,omitempty"`
}

// EncodeBlob is the stored form of a definition (the store keeps it as given).
func EncodeBlob(p job.Properties) ([]byte, error) {
	sched, err := json.Marshal(schedulePart{StartTime: p.StartTime, Recurrence: p.Recurrence})
	if err != nil {
		return nil, fmt.Errorf("encode job schedule: %w", err)
	}
	action, err := json.Marshal(p.Action)
	if err != nil {
		return nil, fmt.Errorf("encode job action: %w", err)
	}
	return append(append(sched, '\n'), action...), nil
}

// SplitBlob returns the schedule part of a stored definition decoded, and its action as the
// JSON it was stored as.
func SplitBlob(b []byte) (job.Properties, json.RawMessage, error) {
	sched, action, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return job.Properties{}, nil, errors.New("decode stored job definition: no action part")
	}
	var v schedulePart
	if err := json.Unmarshal(sched, &v); err != nil {
		return job.Properties{}, nil, fmt.Errorf("decode stored job schedule: %w", err)
	}
	return job.Properties{StartTime: v.StartTime, Recurrence: v.Recurrence}, action, nil
}

// DecodeBlob reads a stored definition back into properties (without state and status).
func DecodeBlob(b []byte) (job.Properties, error) {
	p, action, err := SplitBlob(b)
	if err != nil {
		return job.Properties{}, err
	}
	if err := json.Unmarshal(action, &p.Action); err != nil {
		return job.Properties{}, fmt.Errorf("decode stored job action: %w", err)
	}
	return p, nil
}

// Compile compiles a job's schedule as accepted at `accepted`.
func Compile(p job.Properties, accepted time.Time) (*recurrence.Schedule, error) {
	s, err := recurrence.Compile(p.StartTime, p.Recurrence, accepted)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	return s, nil
}

// unit is the length of one frequency unit, for comparing recurrences with a quota.
var unit = [...]time.Duration{
	job.Second: time.Second, job.Minute: time.Minute, job.Hour: time.Hour, job.Day: 24 * time.Hour,
	job.Week: 7 * 24 * time.Hour, job.Month: 28 * 24 * time.Hour, job.Year: 365 * 24 * time.Hour,
}

// quotaProbe is how many executions are looked at to find a job's shortest gap.
const quotaProbe = 100

// checkMaxRecurrence refuses a job that recurs more often than its collection allows. A schedule
// can run several times per period (minutes [0,15,30,45] with Day), so the gap is measured on
// the job's own next executions rather than read from frequency and interval.
//
// The immediate first run of a job without startTime is not part of its rhythm and is left out.
func checkMaxRecurrence(q *job.Quota, s *recurrence.Schedule, accepted time.Time) error {
	if q == nil || q.MaxRecurrence == nil || q.MaxRecurrence.Frequency == 0 {
		return nil
	}
	m := q.MaxRecurrence
	shortest := time.Duration(math.MaxInt64) // an interval beyond ~292 years allows no recurrence
	if n := time.Duration(max(m.Interval, 1)); n <= time.Duration(math.MaxInt64)/unit[m.Frequency] {
		shortest = unit[m.Frequency] * n
	}
	times := s.Preview(quotaProbe)
	if len(times) > 0 && times[0].Equal(accepted.Truncate(time.Millisecond)) {
		times = times[1:]
	}
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < shortest {
			return conflict("the job recurs every %v at times (from %s to %s), more often than the collection's maxRecurrence of %d %s allows",
				gap, times[i-1].Format(time.RFC3339), times[i].Format(time.RFC3339), max(m.Interval, 1), m.Frequency)
		}
	}
	return nil
}
