package intake_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/intake"
	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/services/planner/internal/store"
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

// countingJS counts the stream information requests made through it.
type countingJS struct {
	jetstream.JetStream
	streams atomic.Int64
}

func (c *countingJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	c.streams.Add(1)
	return c.JetStream.Stream(ctx, name)
}

// Batches applied side by side take messages out of order; that alone is no sign of a stream
// made again, and the intake does not ask the server about its stream for each of them.
func TestOutOfOrderBatchesDoNotReadTheStreamAgain(t *testing.T) {
	e := newEnv(t)
	const n = 400
	for i := range n {
		e.publish(t, fmt.Sprintf("scheduler.jobs.c.j%d", i), definition, nil)
	}
	js := &countingJS{JetStream: e.js}
	e.run(t, e.svc, func(c *intake.Config) { c.JS, c.Batch, c.Handlers = js, 4, 8 })
	testenv.Eventually(t, 30*time.Second, "every message applied", func() bool { return e.pending(t) == 0 })
	if got := js.streams.Load(); got > 2 {
		t.Errorf("the stream's information was read %d times for %d messages, want once (twice at most)", got, n)
	}
}

// A stream deleted and made again starts its sequences anew: a put in it is not taken for an
// older change than those applied from the old stream.
func TestStreamMadeAgainIsNoticed(t *testing.T) {
	e := newEnv(t)
	e.run(t, e.svc)
	for i := range 5 {
		e.publish(t, "scheduler.jobs.c.j", strings.Replace(definition, `"method": "POST"}`, fmt.Sprintf(`"method": "POST", "headers": {"X-Round": "%d"}}`, i), 1), nil)
	}
	testenv.Eventually(t, 10*time.Second, "the first stream applied", func() bool { return e.pending(t) == 0 })
	ctx := context.Background()
	if err := e.js.DeleteStream(ctx, subjects.IntakeStream()); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureStreams(ctx, e.js, subjects, bus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	e.publish(t, "scheduler.jobs.c.j", strings.Replace(definition, `"method": "POST"}`, `"method": "POST", "headers": {"X-Round": "new"}}`, 1), nil)
	testenv.Eventually(t, 10*time.Second, "the put of the new stream applied", func() bool {
		d, err := e.svc.GetJob(ctx, "c", "j")
		return err == nil && d.Properties.Action.Request.Headers["X-Round"] == "new"
	})
}

// A published change older than one applied before it (the planners apply the stream in
// parallel) changes nothing, and its publisher, waiting for the word on its own message, hears
// so: a superseded event with its sequence. The last change applied, delivered again, says
// nothing more (its publisher heard it was accepted).
func TestAChangeOverriddenBeforeItIsAppliedIsSaidSo(t *testing.T) {
	e := newEnv(t)
	sub := e.watch(t, "scheduler.events.c.j.*")
	for _, seq := range []uint64{10, 5, 10, 11} {
		ch := jobs.Change{Collection: "c", Name: "j", Raw: []byte(definition), Stamp: store.Stamp{Epoch: 1, Seq: seq}}
		if o := e.svc.Apply(context.Background(), []jobs.Change{ch})[0]; o.Err != nil {
			t.Fatalf("change %d: %v", seq, o.Err)
		}
	}
	var got []string
	for range 3 {
		ev := nextEvent(t, sub)
		got = append(got, fmt.Sprintf("%s %d", ev.Kind, ev.IntakeSequence))
	}
	if want := []string{"accepted 10", "superseded 5", "accepted 11"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}
