package jobs

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/resched/resched/shared/timezone"

	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/recurrence"
)

// PreviewRequest asks for the first executions of a job as if accepted at Now.
type PreviewRequest struct {
	Job   json.RawMessage `json:"job"`
	Now   *time.Time      `json:"now,omitempty"`   // default: the planner's clock
	Count int             `json:"count,omitempty"` // default 10, at most 1,000
}

// Preview lists the executions the planner would make for a job (docs/recurrence.md §10), and why
// there are fewer than asked for ("" when there are as many).
func (s *Service) Preview(r PreviewRequest) ([]time.Time, string, error) {
	def, err := s.validator.DecodeToPreview(r.Job)
	if err != nil {
		return nil, "", invalid(err)
	}
	now := s.now()
	if r.Now != nil {
		now = *r.Now
	}
	n := r.Count
	if n <= 0 {
		n = 10
	}
	sched, err := Compile(def.Properties, now)
	if err != nil {
		return nil, "", err
	}
	times, reason := sched.Upcoming(min(n, MaxPageSize))
	if rec := def.Properties.Recurrence; rec != nil && rec.TimeZone != "" {
		// In the schedule's zone: the caller sees its offsets, and a change of them (DST).
		if loc, err := timezone.Load(rec.TimeZone); err == nil {
			for i := range times {
				times[i] = times[i].In(loc)
			}
		}
	}
	if reason == recurrence.NotDone {
		return times, "", nil
	}
	return times, reason.String(), nil
}

// Runs are the next executions of a stored job, and why there are fewer than asked for.
type Runs struct {
	Value  []time.Time `json:"value"`
	Reason string      `json:"reason,omitempty"` // why the list ends early: the series is over, the job or its collection disabled
}

// Runs lists the next n executions of a job as its planner will make them, from its stored
// schedule and count (a job without startTime is anchored at its acceptance, not now).
func (s *Service) Runs(ctx context.Context, c, j string, n int) (Runs, error) {
	rec, err := s.store.GetJob(ctx, c, j)
	if err != nil {
		return Runs{}, storeError(err, c, j)
	}
	coll, err := s.collection(ctx, c)
	if err != nil {
		return Runs{}, err
	}
	n = min(max(n, 1), MaxPageSize)
	switch {
	case rec.State != job.StateEnabled:
		return Runs{Value: []time.Time{}, Reason: "the job is " + string(rec.State)}, nil
	case coll.Properties.State.Pauses():
		return Runs{Value: []time.Time{}, Reason: "its collection is " + strings.ToLower(string(coll.Properties.State)) + ": the job is paused"}, nil
	case rec.Next.IsZero():
		return Runs{Value: []time.Time{}, Reason: "no execution is left"}, nil
	}
	p, _, err := SplitBlob(rec.Definition) // the schedule alone
	if err != nil {
		return Runs{}, err
	}
	sched, err := Compile(p, rec.Accepted)
	if err != nil {
		return Runs{}, err
	}
	times, reason := sched.Following(rec.Next, rec.Fired, n)
	out := Runs{Value: times}
	if reason != recurrence.NotDone {
		out.Reason = reason.String()
	}
	return out, nil
}
