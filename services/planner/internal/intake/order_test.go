package intake_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/testenv"
)

// Two planners apply the stream at once, in batches: puts and deletes of the same job still
// end as the last one published says.
func TestConcurrentIntakesKeepEachJobsOrder(t *testing.T) {
	e := newEnv(t)
	del := nats.Header{bus.HeaderOperation: []string{"delete"}}
	// Published before the intakes run, so that they take it in large batches at once.
	const rounds = 300
	for i := range rounds {
		for _, j := range []string{"flip", "flop"} {
			body := strings.Replace(definition, `"method": "POST"}`, fmt.Sprintf(`"method": "POST", "headers": {"X-Round": "%d"}}`, i), 1)
			switch {
			case j == "flip" && i%3 == 2, j == "flop" && i%2 == 1:
				e.publish(t, "scheduler.jobs.c."+j, "", del)
			default:
				e.publish(t, "scheduler.jobs.c."+j, body, nil)
			}
		}
		e.publish(t, fmt.Sprintf("scheduler.jobs.c.other-%d", i), definition, nil)
	}
	e.run(t, e.svc)
	e.run(t, e.svc)
	testenv.Eventually(t, 30*time.Second, "every message applied", func() bool { return e.pending(t) == 0 })
	// rounds-1 = 299: flip's last message is a delete (299 % 3 == 2); flop's is a delete (odd).
	// Round 298 is flip's put (298 % 3 == 1) and flop's put (even).
	if e.exists("c", "flip") || e.exists("c", "flop") {
		t.Fatal("a job deleted by the last message exists")
	}
	e.publish(t, "scheduler.jobs.c.flip", strings.Replace(definition, `"method": "POST"}`, `"method": "POST", "headers": {"X-Round": "last"}}`, 1), nil)
	testenv.Eventually(t, 10*time.Second, "the last put applied", func() bool { return e.exists("c", "flip") })
	d, err := e.svc.GetJob(context.Background(), "c", "flip")
	if err != nil || d.Properties.Action.Request.Headers["X-Round"] != "last" {
		t.Fatalf("flip holds %v (%v), want the last put", d.Properties.Action.Request.Headers, err)
	}
	for i := range rounds {
		if !e.exists("c", fmt.Sprintf("other-%d", i)) {
			t.Fatalf("other-%d was not stored", i)
		}
	}
}
