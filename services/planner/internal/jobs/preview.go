package jobs

import (
	"encoding/json"
	"time"
)

// PreviewRequest asks for the first executions of a job as if accepted at Now.
type PreviewRequest struct {
	Job   json.RawMessage `json:"job"`
	Now   *time.Time      `json:"now,omitempty"`   // default: the planner's clock
	Count int             `json:"count,omitempty"` // default 10, at most 1,000
}

// Preview lists the executions the planner would make for a job (recurrence.md §10).
func (s *Service) Preview(r PreviewRequest) ([]time.Time, error) {
	def, err := s.validator.Decode(r.Job)
	if err != nil {
		return nil, invalid(err)
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
		return nil, err
	}
	return sched.Preview(min(n, MaxPageSize)), nil
}
