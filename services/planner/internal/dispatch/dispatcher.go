// Package dispatch turns due jobs into published occurrences: it claims due jobs from Redis
// in batches under a lease, publishes each occurrence to JetStream with a message id made from
// the job and its scheduled time, then advances each job to its next fire time. Any number of
// planners may run it side by side: a claim is atomic, a planner that dies mid-batch loses
// nothing (its lease runs out and another planner claims the jobs again), and a re-publish of
// the same occurrence is dropped by JetStream's duplicate window.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/store"
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

// Config gathers a Dispatcher's dependencies and settings.
type Config struct {
	Store    *store.Store
	JS       jetstream.JetStream
	Events   Publisher
	Subjects bus.Subjects
	Clock    func() time.Time
	Logger   *slog.Logger
	Metrics  Metrics

	Lease   time.Duration // how long a claim keeps other planners off; default 30 s
	Batch   int           // jobs per claim; default 256
	CatchUp time.Duration // an occurrence later than this is skipped, not fired; default 1 h
	MaxIdle time.Duration // longest wait between two looks at the due set; default 50 ms
	// Lookahead claims jobs this long before they are due, so their messages are ready and
	// each is published the moment it is due (never before): fire lag is then the publish
	// alone. 0 claims only what is due.
	Lookahead   time.Duration
	Concurrency int // partitions worked on at once; default all (16)
	CacheSize   int // compiled schedules kept per worker goroutine; default 50,000
}

func (c *Config) defaults() {
	c.Lease = cmpOr(c.Lease, 30*time.Second)
	c.Batch = cmpOr(c.Batch, 256)
	c.CatchUp = cmpOr(c.CatchUp, time.Hour)
	c.MaxIdle = cmpOr(c.MaxIdle, 50*time.Millisecond)
	c.Concurrency = min(cmpOr(c.Concurrency, store.Partitions), store.Partitions)
	c.CacheSize = cmpOr(c.CacheSize, 50_000)
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

func cmpOr[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// Dispatcher publishes due occurrences.
type Dispatcher struct{ cfg Config }

// New returns a Dispatcher.
func New(cfg Config) *Dispatcher {
	cfg.defaults()
	return &Dispatcher{cfg: cfg}
}

// Run dispatches until ctx ends, then returns once the batches in hand are published and
// advanced. Each of Concurrency goroutines owns a fixed share of the partitions.
func (d *Dispatcher) Run(ctx context.Context) error {
	errs := make(chan error, d.cfg.Concurrency)
	for i := range d.cfg.Concurrency {
		var parts []int
		for p := i; p < store.Partitions; p += d.cfg.Concurrency {
			parts = append(parts, p)
		}
		w := &worker{cfg: &d.cfg, partitions: parts, cache: newScheduleCache(d.cfg.CacheSize)}
		go func() { errs <- w.run(ctx) }()
	}
	var err error
	for range d.cfg.Concurrency {
		err = errors.Join(err, <-errs)
	}
	return err
}

// DispatchOnce runs one claim-publish-advance round over every partition and reports how many
// occurrences it published. Tests and benchmarks use it to drive the loop step by step.
func (d *Dispatcher) DispatchOnce(ctx context.Context) (int, error) {
	w := &worker{cfg: &d.cfg, cache: newScheduleCache(d.cfg.CacheSize)}
	for p := range store.Partitions {
		w.partitions = append(w.partitions, p)
	}
	return w.round(ctx)
}

// RunNow publishes one occurrence of a job at the current time, outside its schedule: the
// schedule, the count and the next fire time are unchanged. Its occurrence number is 0, which
// marks a manual run in the history.
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
	msg := &natsMsg{subject: d.cfg.Subjects.Due(c, j), data: bus.AppendDue(nil, c, j, now, 0, e.action), id: bus.MsgID(c, j, now)}
	if _, err := d.cfg.JS.PublishMsg(ctx, msg.build()); err != nil {
		return fmt.Errorf("publish run-now occurrence of %s/%s: %w", c, j, err)
	}
	d.cfg.Metrics.Published(1)
	return nil
}

type noMetrics struct{}

func (noMetrics) Claimed(int)           {}
func (noMetrics) Published(int)         {}
func (noMetrics) Skipped(int)           {}
func (noMetrics) FireLag(time.Duration) {}
func (noMetrics) Error(string)          {}
