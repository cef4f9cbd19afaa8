package jobs

import (
	"testing"
	"time"

	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// TestADisabledJobKeepsItsCounts: a job disabled (for failing, often) still says how often it
// ran and failed, and when last; it has no next run.
func TestADisabledJobKeepsItsCounts(t *testing.T) {
	last := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	rec := &store.Job{Collection: "c", Name: "j", State: job.StateDisabled, Next: last.Add(time.Hour),
		Counters: store.Counters{Executions: 7, Failures: 3, Faults: 1, LastExecution: last}}
	st := definition(rec, job.Properties{}).Properties.Status
	if st == nil || st.ExecutionCount != 7 || st.FailureCount != 3 || st.FaultedCount != 1 ||
		st.LastExecutionTime == nil || !st.LastExecutionTime.Equal(last) || st.NextExecutionTime != nil {
		t.Errorf("a disabled job's status: %+v", st)
	}
	rec.State = job.StateEnabled
	if st := definition(rec, job.Properties{}).Properties.Status; st == nil || st.NextExecutionTime == nil || st.ExecutionCount != 7 {
		t.Errorf("an enabled job's status: %+v", st)
	}
}
