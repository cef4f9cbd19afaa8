package consumer_test

// The consumer's set-up: made again when JetStream does not answer or refuses, and again after
// the consumer is interrupted.

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/worker/internal/consumer"
	"github.com/resched/resched/shared/job"
)

// An attempt to set the consumer up that JetStream never answers (a request it received while
// it elected a leader) is given up after 2 s, three times, then after 4 s, 8 s, and at most
// PublishTimeout: a worker that had moved to a healthy server waited 10 s for each before.
func TestConsumerSetUpTriesShortThenLonger(t *testing.T) {
	e := newEnv(t)
	calls := make(chan time.Duration, 16)
	e.worker(t, func(c *consumer.Config) {
		c.JS = &unansweredSetup{JetStream: c.JS, calls: calls, unanswered: 6}
	})
	want := []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	var deadlines []time.Duration
	for len(deadlines) < len(want) {
		select {
		case d := <-calls:
			deadlines = append(deadlines, d)
		case <-time.After(deadline):
			t.Fatalf("%d attempts to set the consumer up, want %d", len(deadlines), len(want))
		}
	}
	for i, want := range want {
		if got := deadlines[i]; got > want || got < want-time.Second {
			t.Errorf("attempt %d had %v, want %v", i+1, got.Round(time.Millisecond), want)
		}
	}
	tag := e.publishDue(t, "c", "j", scheduled, job.Action{ActionSpec: httpAct(newTarget(t).URL, nil)})
	if got := e.results(t).take(t, 1); got[0].ExecutionTag != tag {
		t.Errorf("result %+v, want one of %s once set up", got[0], tag)
	}
}

// An attempt that waited its whole time for an answer is made again at once; one refused at
// once waits the retry delay, so that a JetStream refusing does not get a request a millisecond.
func TestUnansweredSetUpIsMadeAgainAtOnce(t *testing.T) {
	e := newEnv(t)
	var logs testenv.LogBuffer
	e.loggedWorker(t, &logs, func(c *consumer.Config) {
		c.JS = &unansweredSetup{JetStream: c.JS, calls: make(chan time.Duration, 16), unanswered: 2, waitFirst: true}
	})
	waits := loggedWaits(t, &logs, "due consumer set-up failed", 2)
	if want := []string{"0s", "50ms"}; !slices.Equal(waits, want) {
		t.Errorf("waits after an unanswered and a refused attempt %v, want %v", waits, want)
	}
}

// A consumer interrupted after it had pulled for a while (deleted here; its leader handed
// over in a rolling restart of NATS, in production) is set up again at once: each worker
// stopped consuming for its retry delay (1 s) at every such interruption before.
func TestConsumerInterruptedAfterAWhileIsSetUpAgainAtOnce(t *testing.T) {
	e := newEnv(t)
	var logs testenv.LogBuffer
	tg := newTarget(t)
	e.loggedWorker(t, &logs, func(c *consumer.Config) {
		c.RetryDelay = time.Microsecond // less than any consumer runs
	})
	e.publishDue(t, "c", "j1", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})
	e.results(t).take(t, 1)
	if err := e.js.DeleteConsumer(context.Background(), e.subjects.DueStream(), bus.WorkerConsumer); err != nil {
		t.Fatal(err)
	}
	waits := loggedWaits(t, &logs, "due consumer interrupted", 1)
	if waits[0] != "0s" {
		t.Errorf("wait before setting the consumer up again %s, want 0s", waits[0])
	}
	tag := e.publishDue(t, "c", "j2", scheduled, job.Action{ActionSpec: httpAct(tg.URL, nil)})
	if got := e.results(t).take(t, 1); got[0].ExecutionTag != tag {
		t.Errorf("result %+v, want one of %s once set up again", got[0], tag)
	}
}

// A consumer interrupted as soon as it is set up waits the retry delay before the next set-up,
// so that one that keeps failing is not set up again in a loop.
func TestConsumerInterruptedAtOnceWaitsBeforeTheNextSetUp(t *testing.T) {
	e := newEnv(t)
	var logs testenv.LogBuffer
	e.loggedWorker(t, &logs, func(c *consumer.Config) {
		c.RetryDelay = time.Hour // longer than any pull of this test can run
		c.JS = failingFetches{c.JS}
	})
	waits := loggedWaits(t, &logs, "due consumer interrupted", 1)
	if waits[0] != "1h0m0s" {
		t.Errorf("wait before setting the consumer up again %s, want the retry delay", waits[0])
	}
}

// failingFetches is JetStream whose consumers' pulls fail at once.
type failingFetches struct{ jetstream.JetStream }

func (f failingFetches) CreateOrUpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c, err := f.JetStream.CreateOrUpdateConsumer(ctx, stream, cfg)
	return failingFetch{c}, err
}

type failingFetch struct{ jetstream.Consumer }

func (failingFetch) Fetch(int, ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	return nil, errors.New("interrupted")
}

// unansweredSetup is JetStream whose first stream look-ups fail (the very first waiting out its
// deadline, with waitFirst), and which reports how long each look-up was given.
type unansweredSetup struct {
	jetstream.JetStream
	calls      chan<- time.Duration
	unanswered int
	waitFirst  bool
}

func (u *unansweredSetup) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	dl, _ := ctx.Deadline()
	select {
	case u.calls <- time.Until(dl):
	default: // the test has what it needs
	}
	if u.waitFirst {
		u.waitFirst = false
		u.unanswered--
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if u.unanswered > 0 {
		u.unanswered--
		return nil, context.DeadlineExceeded
	}
	return u.JetStream.Stream(ctx, name)
}
