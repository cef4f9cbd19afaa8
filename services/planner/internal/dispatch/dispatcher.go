// Package dispatch turns due jobs into published occurrences. Each partition of the due set is
// dispatched by the one live planner that holds its lease (package lease): it reads the jobs
// due in the partition, decides what fires (the catch-up rules), publishes each occurrence to
// JetStream at its time with a message id made from the job and its scheduled time, then
// advances each job to its next time. The scripts that read and move jobs check the lease, so a
// planner that lost it moves nothing; one that dies mid-batch loses nothing (the next holder
// reads the same jobs again, and a re-publish of the same occurrence is dropped by JetStream's
// duplicate window).
package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// Publisher sends events (core NATS).
type Publisher interface {
	Publish(subject string, data []byte) error
}

// Metrics records what the dispatcher does; see package metrics for the Prometheus one.
type Metrics interface {
	Claimed(n int)
	Published(n int)
	Skipped(n int)
	FireLag(d time.Duration)
	Error(stage string)
}

// Leases says which partitions this planner may dispatch; *lease.Leases is the real one.
type Leases interface {
	// Use starts a round on partition p; false when this planner does not hold it. The
	// occurrences due by hold.DueBy may not be dispatched before hold.Until (zero: none held).
	Use(p int) (done func(), hold store.Hold, ok bool)
	// Lost records that a script found the lease held by another planner.
	Lost(p int)
	// Token is the lease holder's value, which the scripts check.
	Token() string
	// Outages are the intervals in which no planner ran, newest first.
	Outages() []store.Outage
}

// Config gathers a Dispatcher's dependencies and settings.
type Config struct {
	Store    *store.Store
	JS       jetstream.JetStream
	Events   Publisher
	Leases   Leases
	Subjects bus.Subjects
	Clock    func() time.Time
	Logger   *slog.Logger
	Metrics  Metrics

	Batch   int           // jobs advanced together, and most messages published per batch; default 256
	CatchUp time.Duration // an occurrence this late or later never fires; default 1 h
	// CatchUpPolicy applies to occurrences missed while every planner was down, for jobs without
	// their own; default Latest.
	CatchUpPolicy job.CatchUpPolicy
	// CatchUpRate is the most missed occurrences one job fires per second; default 10.
	CatchUpRate int
	MaxIdle     time.Duration // longest wait between two looks at a partition; default 1 s
	// WakeLinger is how long a partition woken (by a put) waits for the wake-ups that follow
	// before it looks, never past the look it had planned: a stream of jobs put to run now then
	// goes out a batch a round, not one round (a claim, a publish, an advance) each. A put heard
	// while a round ran is lingered for too. Zero: at once.
	WakeLinger time.Duration
	// Lookahead reads jobs this long before they are due, so their messages are ready and each
	// is published the moment it is due (never before): fire lag is then the publish alone.
	Lookahead   time.Duration
	Concurrency int // partitions dispatched at once; default 16
	CacheSize   int // compiled schedules kept in all; default 200,000
	// CallTimeout bounds each Redis call of a batch (a claim, a read, an advance), as the lease
	// renewal's deadline does; the planner gives it the same, a third of the lease. A call
	// that fails is repeated by the next round (JetStream drops the copies an advance not made
	// has published again). Without it, a call waiting on a Redis master that hangs, rather
	// than dies, held its partition for the client's read time-out and its retries, about
	// 10 s, after a replica had taken over (docs/scaling.md). A batch's calls take
	// milliseconds: none timed out in a burst of 100,000 jobs due at one second. Default 1 s.
	CallTimeout time.Duration
	// PublishRetries is how often a publish that failed is tried again within a batch, over
	// about two seconds (a stream leader election); default 4.
	PublishRetries int
}

func (c *Config) defaults() {
	c.Batch = cmpOr(c.Batch, 256)
	c.CatchUp = cmpOr(c.CatchUp, time.Hour)
	c.CatchUpPolicy = cmpOr(c.CatchUpPolicy, job.CatchUpLatest)
	c.CatchUpRate = cmpOr(c.CatchUpRate, 10)
	c.MaxIdle = cmpOr(c.MaxIdle, time.Second)
	c.Concurrency = cmpOr(c.Concurrency, 16)
	c.CacheSize = cmpOr(c.CacheSize, 200_000)
	c.PublishRetries = cmpOr(c.PublishRetries, 4)
	c.CallTimeout = cmpOr(c.CallTimeout, time.Second)
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
}

// roundBatches is how many batches one round of a partition reads and publishes before it
// awaits the first one's acknowledgements (batch): 8,192 jobs at the default batch, so that
// thousands due at one second are all read within the lookahead and go out at once. It also
// bounds what a partition holds in memory for a round, about 1 KB a message.
const roundBatches = 32

// JetStreamOptions are the options of the JetStream context the dispatcher publishes with: room
// for every publish it may have unacknowledged at once (Concurrency rounds of roundBatches
// batches of at most Batch messages), since past nats.go's limit (4,000 by default) a publish
// stalls and then fails. The limit allocates nothing. A publish not acknowledged within a
// batch's time is dropped from nats.go's table: a round sends a stalled one again (ackStall),
// and the first send's entry would otherwise stay until the connection drops.
func JetStreamOptions(concurrency, batch int) []jetstream.JetStreamOpt {
	return []jetstream.JetStreamOpt{
		jetstream.WithPublishAsyncMaxPending(max(4000, cmpOr(concurrency, 16)*cmpOr(batch, 256)*roundBatches+1000)),
		jetstream.WithPublishAsyncTimeout(batchTimeout),
	}
}

func cmpOr[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// Dispatcher publishes due occurrences.
type Dispatcher struct {
	cfg     Config
	wake    []chan struct{} // one per partition: something became due there
	watches []changeWatch   // one per partition: jobs changed while a batch holds them
	slots   chan struct{}   // rounds running at once
}

// New returns a Dispatcher.
func New(cfg Config) *Dispatcher {
	cfg.defaults()
	d := &Dispatcher{cfg: cfg, wake: make([]chan struct{}, cfg.Store.Partitions()), watches: make([]changeWatch, cfg.Store.Partitions()),
		slots: make(chan struct{}, cfg.Concurrency)}
	for p := range d.wake {
		d.wake[p] = make(chan struct{}, 1)
	}
	return d
}

// Wake tells the dispatcher of partition p to look at its due set now: a job there became due
// sooner than it was waiting for, or the partition's lease was just taken.
func (d *Dispatcher) Wake(p int) {
	if p < 0 || p >= len(d.wake) {
		return
	}
	select {
	case d.wake[p] <- struct{}{}:
	default:
	}
}

// Changed tells the dispatcher of partition p that jobs there changed, named by their due-set
// members (store.Member), or every job of a collection (store.Member(c, "")): put again,
// deleted or disabled. An occurrence of theirs that a batch read before the change and holds
// for its time is not sent (changeWatch).
func (d *Dispatcher) Changed(p int, jobs []string) {
	if p < 0 || p >= len(d.watches) {
		return
	}
	d.watches[p].add(jobs)
}

// Run dispatches every partition this planner holds until ctx ends, then returns once the
// batches in hand are published and advanced.
func (d *Dispatcher) Run(ctx context.Context) error {
	done := make(chan struct{})
	for p := range d.wake {
		pd := &partitionDispatcher{Dispatcher: d, p: p, cache: newScheduleCache(max(d.cfg.CacheSize/len(d.wake), 1000))}
		go func() { pd.run(ctx); done <- struct{}{} }()
	}
	for range d.wake {
		<-done
	}
	return nil
}

// RunNow publishes one occurrence of a job at the current time, outside its schedule: the
// schedule, the count and the next fire time are unchanged. Its occurrence number is 0, which
// marks a manual run in the history, and its message id and execution tag are its own, so it
// never collides with a scheduled occurrence of the same millisecond, nor with another run-now.
func (d *Dispatcher) RunNow(ctx context.Context, c, j string) error {
	rec, err := d.cfg.Store.GetJob(ctx, c, j)
	if err != nil {
		return err
	}
	e, err := compileEntry(rec)
	if err != nil {
		return err
	}
	now := d.cfg.Clock().UTC().Truncate(time.Millisecond)
	id := bus.RunNowID(c, j, rec.Incarnation, now, nonce())
	data := bus.AppendDueTagged(nil, c, j, rec.Incarnation, now, bus.TagOf(id), 0, e.action)
	msg := &natsMsg{subject: d.cfg.Subjects.Due(c, j), data: data, id: id}
	if _, err := d.cfg.JS.PublishMsg(ctx, msg.build()); err != nil {
		return fmt.Errorf("publish run-now occurrence of %s/%s: %w", c, j, err)
	}
	d.cfg.Metrics.Published(1)
	return nil
}

// nonce is 8 random bytes in hex: what makes two run-nows of one millisecond two occurrences.
func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errStalled reports publishes not acknowledged in time; the jobs stay due and are retried.
var errStalled = errors.New("publishes not acknowledged")

// errDueStreamFull names the cause an operator must act on when the due stream has no room:
// the workers stopped taking occurrences, or JetStream's storage is too small
// (docs/operations.md, Streams).
var errDueStreamFull = errors.New("the due stream is full (JetStream's storage, the account's limit or the stream's max bytes or messages)")

type noMetrics struct{}

func (noMetrics) Claimed(int)           {}
func (noMetrics) Published(int)         {}
func (noMetrics) Skipped(int)           {}
func (noMetrics) FireLag(time.Duration) {}
func (noMetrics) Error(string)          {}

// DispatchOnce runs one round on every partition this planner holds and reports how many
// occurrences it published. Tests use it to drive the dispatcher step by step with a clock of
// their own; the planner runs Run.
func (d *Dispatcher) DispatchOnce(ctx context.Context) (int, error) {
	count := &countingMetrics{Metrics: d.cfg.Metrics}
	saved := d.cfg.Metrics
	d.cfg.Metrics = count
	defer func() { d.cfg.Metrics = saved }()
	for p := range d.wake {
		done, hold, ok := d.cfg.Leases.Use(p)
		if !ok {
			continue
		}
		pd := &partitionDispatcher{Dispatcher: d, p: p, cache: newScheduleCache(1000)}
		_, err := pd.round(ctx, hold.DueBy)
		done()
		if err != nil {
			return count.n, err
		}
	}
	return count.n, nil
}

// countingMetrics counts publishes for DispatchOnce.
type countingMetrics struct {
	Metrics
	n int
}

func (c *countingMetrics) Published(n int) { c.n += n; c.Metrics.Published(n) }
