// Package consumer is the worker's JetStream side: every worker pulls due occurrences from one
// shared durable consumer of the due stream, runs each through the executor, publishes the
// attempt's result (on <prefix>.results.<collection>.<job>, or with others of its collection on
// <prefix>.results.<collection>: see reporter), and only then settles the due message:
//   - done (a success, or the last attempt failed): acknowledged;
//   - to be retried: negatively acknowledged with the retry interval as delay, so the retry
//     waits in JetStream and survives any worker's restart;
//   - handed to the error action: published again with the error phase header, then
//     acknowledged;
//   - malformed: terminated, with a log line and no result, since sending it again cannot help.
//
// A result (or an error action) the stream does not take is published again, less and less
// often, the due message kept in progress: the attempt does not run again (storeAgain).
//
// A worker pulls (Fetch) only as many messages as it has free delivery slots, rather than
// letting Consume or Messages prefetch: a prefetched message waits with its AckWait running,
// and a stop would have to hand it back, which raises its delivery count and so (the count
// numbering attempts) costs it an attempt it never made. A delivery that runs long tells the
// server it is in progress. A worker that dies mid-delivery loses nothing: the server
// redelivers the occurrence to another worker once AckWait has passed.
//
// The one exception is a collection's limit (Config.CollectionConcurrency, turns): a message
// of a collection with its most deliveries in flight is held, kept in progress and without a
// slot, until one of them ends, so that a team whose targets hang cannot hold every slot. A
// stop hands those back, at that cost; handing them back at once instead would cost one at
// every turn they waited.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/setup"
	"github.com/resched/resched/services/worker/internal/executor"
	"github.com/resched/resched/shared/job"
)

// HeaderPhase on a due message says which action it runs; absent means the main action.
// Only workers read it: the error phase is a message of its own so that its attempts are
// numbered by its own delivery count (package executor).
const HeaderPhase = "Resched-Phase"

// phaseError is the value of HeaderPhase on an error action's message.
const phaseError = "error"

// pullWait is how long one pull request waits for messages. It bounds how late a stop sees
// the end of the last pull, and costs an idle worker one request per pullWait.
const pullWait = time.Second

// setupPacing paces the attempts to set the consumer up (package setup says why): 2 s each of
// the first three, then 4 s, 8 s, up to PublishTimeout; a refusal waits RetryDelay, doubling up
// to 2 s. A wait of up to 10 s let a worker idle that long after JetStream was back
// (TestNATSClusterServerCutOff: its leaders elected again when the server cut off rejoined,
// occurrences 9 s late).
func (c *Consumer) setupPacing() setup.Pacing {
	return setup.Pacing{MaxTry: c.cfg.PublishTimeout, Delay: c.cfg.RetryDelay}
}

// errAbandoned is the cause given to deliveries still running when the stop timeout ends.
var errAbandoned = errors.New("worker stopping: delivery abandoned")

// Executor runs one attempt; *executor.Executor is the real one.
type Executor interface {
	Execute(ctx context.Context, a executor.Attempt) (executor.Decision, error)
}

// Metrics records what the consumer does; package metrics has the Prometheus one.
type Metrics interface {
	InFlight(delta int)
	Attempt(actionType job.ActionType, status job.ExecutionStatus, d time.Duration)
	Retry(actionType job.ActionType)
	Error(stage string)
}

// Config gathers a Consumer's dependencies and settings.
type Config struct {
	JS       jetstream.JetStream
	Subjects bus.Subjects
	Executor Executor
	Logger   *slog.Logger
	Metrics  Metrics

	// Concurrency is the number of deliveries in flight at once; default 16.
	Concurrency int
	// CollectionConcurrency is the most deliveries of one collection in flight at once; the
	// others of that collection wait their turn (turns). 0: no limit but Concurrency.
	CollectionConcurrency int
	// RecheckAfter is how long a message waits its turn before the stream is asked, as it
	// leaves the wait, whether its job was deleted meanwhile: one that waited less has the
	// window of one that did not wait, and asking costs two requests. Default 1 s.
	RecheckAfter time.Duration
	// AckWait is how long the server waits for a settlement before it redelivers a message to
	// another worker; it must exceed the longest attempt. Default 90 s.
	AckWait time.Duration
	// MaxAckPending bounds the messages held by all workers together, retries waiting for
	// their delay included; default 10,000.
	MaxAckPending int
	// Streams are the options of the streams when a worker is the first to need them.
	Streams bus.StreamOptions
	// StopTimeout is how long a stop waits for the deliveries in flight; those still running
	// then are cancelled and handed back. Default 30 s.
	StopTimeout time.Duration
	// ResultLinger is how long a result waits for others to go with it in one message; 0
	// sends it as soon as the stream may take another batch.
	ResultLinger time.Duration
	// ResultMaxWait is how long, from the first of them, results wait while the worker is still
	// delivering, so that recording them takes the CPU after the deliveries; never less than
	// ResultLinger.
	ResultMaxWait time.Duration
	// PublishTimeout bounds one publish of a result; default 10 s.
	PublishTimeout time.Duration
	// RetryDelay is the wait after a NATS failure before setting the consumer up again, or
	// before the attempt whose result could not be published runs again; default 1 s.
	RetryDelay time.Duration
}

// Consumer consumes the due stream.
type Consumer struct {
	cfg       Config
	log       *slog.Logger
	ready     atomic.Bool
	running   atomic.Int64   // attempts running
	lastStart atomic.Int64   // when the last attempt started, Unix ns
	results   *reporter      // set by Run
	turns     *turns         // the collections' limits
	heldSaid  atomic.Int64   // when a wait for a collection's turn was last logged, Unix ns
	later     sync.WaitGroup // error actions being scheduled, results published again (finish)
}

// New returns a Consumer.
func New(cfg Config) *Consumer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 90 * time.Second
	}
	if cfg.MaxAckPending <= 0 {
		cfg.MaxAckPending = 10_000
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 30 * time.Second
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 10 * time.Second
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.RecheckAfter <= 0 {
		cfg.RecheckAfter = time.Second
	}
	// A worker holds at most an eighth of the unsettled messages all workers may have waiting
	// for their collection's turn (and a quarter in results waiting, Run), so that a few
	// workers holding theirs never stop the stream.
	return &Consumer{cfg: cfg, log: cfg.Logger, turns: newTurns(cfg.CollectionConcurrency, max(1, cfg.MaxAckPending/8))}
}

// Waiting is the number of due messages this worker holds until their collection's turn.
func (c *Consumer) Waiting() int { return c.turns.waiting() }

// Ready reports whether the consumer is set up and pulling.
func (c *Consumer) Ready() bool { return c.ready.Load() }

// Run pulls and delivers until ctx ends, then stops: it pulls no more, waits up to
// StopTimeout for the deliveries in flight, cancels and hands back those still running, and
// returns. It returns nil after a stop asked for through ctx, an error when the NATS
// connection is closed under it.
func (c *Consumer) Run(ctx context.Context) error {
	// Deliveries outlive ctx: a stop lets them finish, up to StopTimeout.
	work, abandon := context.WithCancelCause(context.WithoutCancel(ctx))
	defer abandon(nil)
	// A fixed pool of delivery goroutines, rather than one per message: a new goroutine's
	// stack grows again on every delivery, and that cost as much as a tenth of a delivery.
	// A worker holds at most a quarter of the unsettled messages all workers may have in
	// results waiting, so that a few workers holding theirs never stop the stream.
	w := waits{linger: c.cfg.ResultLinger, most: c.cfg.ResultMaxWait, held: c.cfg.MaxAckPending / 4, quiet: c.quiet}
	c.results = newReporter(c.cfg.JS, c.cfg.Subjects, w, c.cfg.PublishTimeout, func(m *nats.Msg) error {
		return c.publish(work, m)
	})
	go c.results.run()
	var inflight sync.WaitGroup
	slots := make(chan struct{}, c.cfg.Concurrency)
	msgs := make(chan jetstream.Msg)
	for range c.cfg.Concurrency {
		inflight.Go(func() {
			for msg := range msgs {
				c.deliver(work, msg)
				release(slots, 1)
			}
		})
	}

	err := c.pullLoop(ctx, slots, msgs)
	close(msgs) // the idle deliverers end; the busy ones end after their delivery
	c.ready.Store(false)
	c.handBack()
	if stopErr := c.stop(&inflight, abandon); stopErr != nil {
		return errors.Join(err, stopErr)
	}
	return err
}

// quiet is how long no attempt has been running: 0 while one runs, else since the last began.
func (c *Consumer) quiet() time.Duration {
	if c.running.Load() > 0 {
		return 0
	}
	return time.Duration(time.Now().UnixNano() - c.lastStart.Load())
}

// stop waits for the deliveries in flight and the settling of those that have ended (their
// results published, their messages settled), abandoning them after StopTimeout.
func (c *Consumer) stop(inflight *sync.WaitGroup, abandon context.CancelCauseFunc) error {
	done := make(chan struct{})
	go func() {
		inflight.Wait()
		c.results.close() // no delivery hands a result over any more
		c.later.Wait()
		close(done)
	}()
	timer := time.NewTimer(c.cfg.StopTimeout)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-timer.C:
	}
	c.log.Warn("stop timeout: cancelling the deliveries still running; they will be redelivered")
	abandon(errAbandoned)
	// Deliverers return promptly once cancelled (the actiontest suite checks it); the bound
	// only keeps a broken one from holding the process.
	timer.Reset(c.cfg.PublishTimeout)
	select {
	case <-done:
		return nil
	case <-timer.C:
		return errors.New("deliveries still running after they were cancelled")
	}
}

// pullLoop sets the consumer up and pulls until ctx ends, setting it up again when it is
// lost (deleted, a server restart).
func (c *Consumer) pullLoop(ctx context.Context, slots chan struct{}, msgs chan<- jetstream.Msg) error {
	for {
		cons, err := c.setup(ctx)
		if err != nil {
			return err
		}
		if cons == nil {
			return nil // ctx ended
		}
		c.ready.Store(true)
		c.log.Info("consuming due occurrences", "stream", c.cfg.Subjects.DueStream(), "consumer", bus.WorkerConsumer,
			"concurrency", c.cfg.Concurrency, "collection_concurrency", c.cfg.CollectionConcurrency)
		began := time.Now()
		err = c.pull(ctx, cons, slots, msgs)
		c.ready.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, jetstream.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionClosed) {
			return fmt.Errorf("due consumer: %w", err)
		}
		wait := setup.Again(time.Since(began), c.cfg.RetryDelay)
		c.log.Warn("due consumer interrupted; setting it up again", "error", err, "retry_in", wait.String())
		if !setup.Wait(ctx, wait) {
			return nil
		}
	}
}

// setup makes sure the streams and the shared consumer exist, retrying until it works or ctx
// ends (then it returns nil, nil). Streams are created only when missing, so workers never
// overwrite the stream settings of the planners.
func (c *Consumer) setup(ctx context.Context) (jetstream.Consumer, error) {
	var cons jetstream.Consumer
	err := setup.Retry(ctx, c.setupPacing(), func(ctx context.Context) error {
		var err error
		cons, err = c.trySetup(ctx)
		if errors.Is(err, jetstream.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionClosed) {
			return setup.Final(err)
		}
		return err
	}, func(err error, wait time.Duration) {
		c.cfg.Metrics.Error("setup")
		c.log.Warn("due consumer set-up failed; retrying", "error", err, "retry_in", wait.String())
	})
	switch {
	case err == nil:
		return cons, nil
	case ctx.Err() != nil:
		return nil, nil
	}
	return nil, fmt.Errorf("due consumer: %w", err)
}

func (c *Consumer) trySetup(ctx context.Context) (jetstream.Consumer, error) {
	stream := c.cfg.Subjects.DueStream()
	_, err := c.cfg.JS.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = bus.EnsureStreams(ctx, c.cfg.JS, c.cfg.Subjects, c.cfg.Streams)
	}
	if err != nil {
		return nil, fmt.Errorf("due stream %s: %w", stream, err)
	}
	cons, err := c.cfg.JS.CreateOrUpdateConsumer(ctx, stream, bus.WorkerConsumerConfig(c.cfg.AckWait, c.cfg.MaxAckPending))
	if err != nil {
		return nil, fmt.Errorf("consumer %s on stream %s: %w", bus.WorkerConsumer, stream, err)
	}
	return cons, nil
}

// pull fetches as many messages as there are free slots and hands each to the pool, until
// ctx ends. Messages of a pull that arrive after ctx ended are delivered too: they are
// already this worker's, and handing them back would cost them an attempt.
func (c *Consumer) pull(ctx context.Context, cons jetstream.Consumer, slots chan struct{}, msgs chan<- jetstream.Msg) error {
	for ctx.Err() == nil {
		free := reserve(ctx, slots)
		if free == 0 {
			return nil
		}
		batch, err := cons.Fetch(free, jetstream.FetchMaxWait(pullWait))
		if err != nil {
			release(slots, free)
			return err
		}
		for msg := range batch.Messages() {
			if c.wait(msg) {
				continue // held, without a slot, until its collection's turn
			}
			// A reserved slot means a deliverer is free, or about to be once it has
			// released its slot, so this send waits little.
			free--
			msgs <- msg
		}
		release(slots, free)
		if err := batch.Error(); err != nil {
			return err
		}
	}
	return nil
}

// reserve waits for one free slot, then takes every other free one; 0 when ctx ended first.
func reserve(ctx context.Context, slots chan struct{}) int {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	n := 1
	for n < cap(slots) {
		select {
		case slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

func release(slots chan struct{}, n int) {
	for range n {
		<-slots
	}
}

type noMetrics struct{}

func (noMetrics) InFlight(int)                                               {}
func (noMetrics) Attempt(job.ActionType, job.ExecutionStatus, time.Duration) {}
func (noMetrics) Retry(job.ActionType)                                       {}
func (noMetrics) Error(string)                                               {}
