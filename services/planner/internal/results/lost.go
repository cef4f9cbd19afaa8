package results

import (
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/store"
)

// resultLost is the results metric's status of a delivery recorded as lost.
const resultLost = "Lost"

// maxLost bounds the deliveries before a result looked at for one left without a result.
const maxLost = 8

// lostBefore lists the deliveries before r's that may have left no result, each with the id
// its result would have had. Deliveries and attempts go together (delivery n runs attempt
// n-1) until a delivery is lost: the next then runs the attempt after the lost one's, up to
// the retry policy's last, which a delivery past the policy runs again. So delivery n ran
// attempt min(n-1, r.Attempt).
func lostBefore(r bus.Result) []store.Lost {
	if r.Delivery <= 1 {
		return nil
	}
	lost := make([]store.Lost, 0, min(r.Delivery-1, maxLost))
	for n := max(1, r.Delivery-maxLost); n < r.Delivery; n++ {
		earlier := r
		earlier.Attempt, earlier.Delivery = min(n-1, r.Attempt), n
		lost = append(lost, store.Lost{Delivery: n, ID: bus.ResultMsgID(earlier)})
	}
	return lost
}
