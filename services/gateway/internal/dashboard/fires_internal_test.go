package dashboard

import (
	"testing"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// The overview counts an occurrence's fire at its first attempt's first delivery: not at a
// retry, nor at a delivery past a policy without retries, which runs attempt 0 again.
func TestAFireIsCountedAtItsFirstDelivery(t *testing.T) {
	at := time.Date(2026, 12, 7, 12, 0, 30, 0, time.UTC)
	h := newHub(nil)
	r := bus.Result{Collection: "c", Job: "j", ActionName: job.ActionNameMain, StartTime: at, Status: job.ExecutionCompleted}
	for _, d := range []int{0, 1, 2} { // from a worker of an earlier release, a first delivery, a re-run
		r.Delivery = d
		h.onResult(r)
	}
	r.Attempt, r.Delivery = 1, 2 // a retry
	h.onResult(r)
	if got := h.minutes[at.Unix()/60%60].per["c"].Fires; got != 2 {
		t.Errorf("%d fires counted, want 2", got)
	}
}
