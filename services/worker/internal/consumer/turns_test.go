package consumer_test

// A collection's limit of deliveries in flight (RESCHED_WORKER_COLLECTION_CONCURRENCY): a team
// whose target hangs keeps its share of a worker's slots, not all of them.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/worker/internal/consumer"
	"github.com/resched/resched/shared/job"
)

// Six occurrences of a collection whose target hangs, then four of another: with four slots and
// a limit of two a collection, the hanging target gets two calls and the other collection its
// four deliveries; once the target answers, the four that waited are delivered as first
// attempts (held, not handed back, which would have cost each a retry). Without the limit the
// hanging collection held all four slots and the other waited for good.
func TestAHangingCollectionLeavesTheOthersTheirSlots(t *testing.T) {
	e := newEnv(t)
	hung, fine := newTarget(t), newTarget(t)
	hung.block, hung.arrived = make(chan struct{}), make(chan struct{}, 16)
	var logs testenv.LogBuffer
	e.loggedWorker(t, &logs, func(c *consumer.Config) { c.CollectionConcurrency = 2 })

	noisy := map[string]bool{}
	for i := range 6 {
		noisy[e.publishDue(t, "noisy", "j"+string(rune('0'+i)), scheduled, job.Action{ActionSpec: httpAct(hung.URL, fixed(3, 0))})] = true
	}
	arrivals(t, hung, 2)
	quiet := map[string]bool{}
	for i := range 4 {
		quiet[e.publishDue(t, "quiet", "j"+string(rune('0'+i)), scheduled, job.Action{ActionSpec: httpAct(fine.URL, nil)})] = true
	}
	rs := e.results(t)
	eachOnce(t, rs.take(t, 4), quiet)
	if n := len(hung.callsSoFar()); n != 2 {
		t.Errorf("the hanging target had %d calls, want its collection's limit, 2", n)
	}

	close(hung.block)
	got := rs.take(t, 6)
	eachOnce(t, got, noisy)
	for _, r := range got {
		if r.Attempt != 0 || r.Status != job.ExecutionCompleted {
			t.Errorf("%s: attempt %d %s, want the first, completed", r.ExecutionTag, r.Attempt, r.Status)
		}
	}
	if n := strings.Count(logs.String(), "its other occurrences wait their turn"); n != 1 {
		t.Errorf("said %d times that the collection waits, want once:\n%s", n, logs.String())
	}
}

// A worker stopped while it holds occurrences waiting for their turn hands them back at once,
// while its own delivery still runs: another worker delivers each once, none lost. Kept, they
// waited for that delivery to end (here its 10 s time-out, when the target does not answer).
func TestAStopHandsBackTheOccurrencesWaitingTheirTurn(t *testing.T) {
	e := newEnv(t)
	hung, fine := newTarget(t), newTarget(t)
	hung.block, hung.arrived = make(chan struct{}), make(chan struct{}, 1)
	var logs testenv.LogBuffer
	stop := e.loggedWorker(t, &logs, func(c *consumer.Config) {
		c.CollectionConcurrency = 1
		c.StopTimeout = time.Minute
	})
	first := e.publishDue(t, "noisy", "hangs", scheduled, job.Action{ActionSpec: httpAct(hung.URL, nil)})
	arrivals(t, hung, 1)
	waited := map[string]bool{}
	for i := range 4 {
		waited[e.publishDue(t, "noisy", "j"+string(rune('0'+i)), scheduled, job.Action{ActionSpec: httpAct(fine.URL, nil)})] = true
	}
	pendingAcks(t, e, 5)
	testenv.Eventually(t, deadline, "the worker's word that they wait", func() bool {
		return strings.Contains(logs.String(), "wait their turn")
	})
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	e.worker(t, nil)
	rs := e.results(t)
	eachOnce(t, rs.take(t, 4), waited)

	close(hung.block)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if r := rs.take(t, 1)[0]; r.ExecutionTag != first {
		t.Errorf("last result %s, want the delivery that ran through the stop, %s", r.ExecutionTag, first)
	}
}

// pendingAcks waits until the workers hold n due messages unsettled.
func pendingAcks(t *testing.T, e *env, n int) {
	t.Helper()
	testenv.Eventually(t, deadline, fmt.Sprintf("%d due messages held by the workers", n), func() bool {
		c, err := e.js.Consumer(context.Background(), e.subjects.DueStream(), bus.WorkerConsumer)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumAckPending == n
	})
}

// arrivals waits until tg has had n requests.
func arrivals(t *testing.T, tg *target, n int) {
	t.Helper()
	for range n {
		select {
		case <-tg.arrived:
		case <-time.After(deadline):
			t.Fatalf("fewer than %d requests reached the target", n)
		}
	}
}

// An occurrence whose job is deleted while it waits its turn (the planners remove it from the
// due stream) is not delivered when its turn comes; the next one of its collection is.
func TestAnOccurrenceDeletedWhileItWaitsIsNotDelivered(t *testing.T) {
	e := newEnv(t)
	hung, fine := newTarget(t), newTarget(t)
	hung.block, hung.arrived = make(chan struct{}), make(chan struct{}, 1)
	e.worker(t, func(c *consumer.Config) {
		c.CollectionConcurrency = 1
		c.RecheckAfter = time.Nanosecond // every message that waited is looked up
	})
	first := e.publishDue(t, "noisy", "hangs", scheduled, job.Action{ActionSpec: httpAct(hung.URL, nil)})
	arrivals(t, hung, 1)
	deleted := e.publishDue(t, "noisy", "deleted", scheduled, job.Action{ActionSpec: httpAct(fine.URL, nil)})
	// Held by the worker, not only sent to it: one still on its way when the hanging delivery
	// ends is no longer waiting, and goes out at once (1 run in 30 on a loaded host).
	testenv.Eventually(t, deadline, "the occurrence held for its turn", func() bool { return e.last.Waiting() == 1 })
	st, err := e.js.Stream(context.Background(), e.subjects.DueStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(context.Background(), jetstream.WithPurgeSubject(e.subjects.Due("noisy", "deleted"))); err != nil {
		t.Fatal(err)
	}
	close(hung.block)
	rs := e.results(t)
	if r := rs.take(t, 1)[0]; r.ExecutionTag != first {
		t.Fatalf("result %s, want the hanging delivery's %s", r.ExecutionTag, first)
	}
	later := e.publishDue(t, "noisy", "later", scheduled, job.Action{ActionSpec: httpAct(fine.URL, nil)})
	if r := rs.take(t, 1)[0]; r.ExecutionTag != later {
		t.Errorf("result %s, want the later occurrence's %s", r.ExecutionTag, later)
	}
	for _, c := range fine.callsSoFar() {
		if c.tag == deleted {
			t.Errorf("the occurrence deleted while it waited was delivered")
		}
	}
}
