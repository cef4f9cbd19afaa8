package job

import "time"

// Status is what the planner records about a job's executions; clients cannot set it.
type Status struct {
	ExecutionCount    int        `json:"executionCount"`
	FailureCount      int        `json:"failureCount"`
	FaultedCount      int        `json:"faultedCount"` // occurrences that failed through every retry
	LastExecutionTime *time.Time `json:"lastExecutionTime,omitempty"`
	NextExecutionTime *time.Time `json:"nextExecutionTime,omitempty"` // absent once the job completes
}

func (s *Status) clone() Status {
	c := *s
	if s.LastExecutionTime != nil {
		t := *s.LastExecutionTime
		c.LastExecutionTime = &t
	}
	if s.NextExecutionTime != nil {
		t := *s.NextExecutionTime
		c.NextExecutionTime = &t
	}
	return c
}
