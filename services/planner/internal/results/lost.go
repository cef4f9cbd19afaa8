package results

import (
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/store"
)

// maxLost bounds the deliveries before a result looked at for one left without a result.
const maxLost = 8

// lostBefore lists the deliveries before r's that may have left no result. Deliveries and
// attempts go together (delivery n runs attempt n-1) until a delivery is lost: the next then
// runs the attempt after the lost one's, up to the retry policy's last, which a delivery past
// the policy runs again. So delivery n ran attempt min(n-1, r.Attempt).
func lostBefore(r bus.Result) []store.Lost {
	if r.Delivery <= 1 {
		return nil
	}
	lost := make([]store.Lost, 0, min(r.Delivery-1, maxLost))
	for n := max(1, r.Delivery-maxLost); n < r.Delivery; n++ {
		l := store.Lost{Delivery: n, Attempt: min(n-1, r.Attempt)}
		if l.Attempt < r.Attempt {
			earlier := r
			earlier.Attempt = l.Attempt
			l.ID = bus.ResultMsgID(earlier)
		}
		lost = append(lost, l)
	}
	return lost
}
