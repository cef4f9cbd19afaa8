// Package pull runs a planner's JetStream pull consumers (the intake and the results): batches
// of the messages at hand to a few handlers at once, the consumer set up again when it is
// lost, the messages received but not handled handed back at a stop so another planner gets
// them at once, and a message whose handling panicked handed back alone to come again later.
package pull

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
	"github.com/resched/resched/services/internal/recovery"
	"github.com/resched/resched/services/internal/setup"
)

// Config says which consumer to run and how.
type Config struct {
	Name     string // for logs and errors: "intake", "results"
	JS       jetstream.JetStream
	Stream   string
	Consumer jetstream.ConsumerConfig
	Prefetch int // messages the server may push ahead of those in hand
	// RetryDelay is the wait between attempts to set a lost consumer up again, and before a
	// batch whose handling panicked comes again.
	RetryDelay time.Duration
	Logger     *slog.Logger
	// Batch is the most messages handed over at once (default 1): those already received, never
	// waiting for more.
	Batch int
	// Handlers is how many batches are handled at once (default 1).
	Handlers int
	// Consuming, when set, is true while the consumer is set up and pulled: readiness. A
	// set-up that never succeeds (a NATS user not allowed to create it) is then seen there
	// and in the log, rather than stopping the planner.
	Consuming *atomic.Bool
	// Missing, when set, is called when the set-up finds no stream (a NATS server that lost
	// its store, a stream deleted by hand), to make the streams again before the next try:
	// otherwise they came back only when a worker made them, or at the planner's next start.
	Missing func(context.Context) error
}

// Run hands messages one by one to handle until ctx ends, then returns nil once the message in
// hand is handled (handle must settle it). It returns an error only when the NATS connection is
// closed; the consumer is set up until that works, at start and whenever it is lost later
// (deleted, a server restart), paced by package setup.
func Run(ctx context.Context, cfg Config, handle func(context.Context, jetstream.Msg)) error {
	cfg.Batch, cfg.Handlers = 1, 1
	return RunBatches(ctx, cfg, func(ctx context.Context, msgs []jetstream.Msg) { handle(ctx, msgs[0]) })
}

// RunBatches is Run with batches: up to Batch messages already received are handed to one of
// Handlers goroutines at once. handle must settle every message of its batch.
func RunBatches(ctx context.Context, cfg Config, handle func(context.Context, []jetstream.Msg)) error {
	cfg.Batch, cfg.Handlers = max(cfg.Batch, 1), max(cfg.Handlers, 1)
	for {
		cons, err := consumer(ctx, cfg)
		if err != nil || cons == nil {
			return err
		}
		cfg.consuming(true)
		began := time.Now()
		err = consume(ctx, cfg, cons, handle)
		cfg.consuming(false)
		if ctx.Err() != nil {
			return nil
		}
		if closed(err) {
			return fmt.Errorf("%s: %w", cfg.Name, err)
		}
		wait := setup.Again(time.Since(began), cfg.RetryDelay)
		cfg.Logger.Warn(cfg.Name+": interrupted; resuming", "error", err, "retry_in", wait.String())
		if !setup.Wait(ctx, wait) {
			return nil
		}
	}
}

func (c Config) consuming(up bool) {
	if c.Consuming != nil {
		c.Consuming.Store(up)
	}
}

// consumer sets the consumer up, trying until it works; nil, nil when ctx ended first.
func consumer(ctx context.Context, cfg Config) (jetstream.Consumer, error) {
	var cons jetstream.Consumer
	pacing := setup.Pacing{Delay: cfg.RetryDelay} // doubling up to 2 s, or RetryDelay when longer
	err := setup.Retry(ctx, pacing, func(ctx context.Context) error {
		var err error
		if cons, err = cfg.JS.CreateOrUpdateConsumer(ctx, cfg.Stream, cfg.Consumer); closed(err) {
			return setup.Final(err)
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) && cfg.Missing != nil {
			if merr := cfg.Missing(ctx); merr != nil {
				return errors.Join(err, fmt.Errorf("make the streams again: %w", merr))
			}
			cfg.Logger.Warn("stream "+cfg.Stream+" was missing: the streams are made again", "consumer", cfg.Name)
			cons, err = cfg.JS.CreateOrUpdateConsumer(ctx, cfg.Stream, cfg.Consumer)
		}
		return err
	}, func(err error, wait time.Duration) {
		cfg.Logger.Warn(cfg.Name+" consumer set-up failed; retrying", "stream", cfg.Stream, "error", err, "retry_in", wait.String())
	})
	switch {
	case err == nil:
		return cons, nil
	case ctx.Err() != nil:
		return nil, nil
	}
	return nil, fmt.Errorf("%s consumer on stream %s: %w", cfg.Name, cfg.Stream, err)
}

// closed reports whether err says the NATS connection is closed for good.
func closed(err error) bool {
	return errors.Is(err, jetstream.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionClosed)
}

// pullHeartbeat is how often the server says a pull request is still held (consume).
const pullHeartbeat = 5 * time.Second

// consume hands batches to the handlers until ctx ends or the iterator fails; it returns once
// every batch handed over is handled.
func consume(ctx context.Context, cfg Config, cons jetstream.Consumer, handle func(context.Context, []jetstream.Msg)) error {
	// Heartbeats every 5 s (the library's default: half the 30 s expiry): a consumer gone
	// without a word (a NATS server back without its store answers the pulls with no
	// responders, which the iterator passes over) ends the iterator after two missed ones, so it
	// is set up again (and its stream made again, Missing) in about 10 s rather than 30.
	it, err := cons.Messages(jetstream.PullMaxMessages(max(cfg.Prefetch, 2*cfg.Batch*cfg.Handlers)), jetstream.PullHeartbeat(pullHeartbeat))
	if err != nil {
		return fmt.Errorf("%s messages: %w", cfg.Name, err)
	}
	defer release(cfg, it)
	batches := make(chan []jetstream.Msg)
	var wg sync.WaitGroup
	for range cfg.Handlers {
		wg.Go(func() {
			for b := range batches {
				handleSafely(ctx, cfg, handle, b)
			}
		})
	}
	defer wg.Wait()
	defer close(batches)
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return err
		}
		batch := []jetstream.Msg{msg}
		for len(batch) < cfg.Batch {
			m, err := it.Next(jetstream.NextMaxWait(time.Millisecond)) // only what is here already
			if err != nil {
				break
			}
			batch = append(batch, m)
		}
		select {
		case batches <- batch:
		case <-ctx.Done():
			handBack(cfg, batch)
			return ctx.Err()
		}
	}
}

// handleSafely runs handle. A panic (a bug that the batch trips) is logged with its stack and
// the planner goes on; unrecovered, it stopped the planner, and the batch, taken again, each
// planner after it. The batch's messages are then handled one by one, so that the others apply
// now, and the one that trips the bug is handed back alone (giveBack). The handlers recognise
// what they applied before (a result's id, an intake change's stamp).
func handleSafely(ctx context.Context, cfg Config, handle func(context.Context, []jetstream.Msg), b []jetstream.Msg) {
	p := handleRecovered(ctx, handle, b)
	switch {
	case p == nil:
	case len(b) == 1:
		p.Log(cfg.Logger, cfg.Name+" message", "subject", b[0].Subject())
		giveBack(cfg, b[0])
	default:
		cfg.Logger.Warn(cfg.Name+": a batch panicked; its messages are handled one by one", "messages", len(b))
		for _, m := range b {
			handleSafely(ctx, cfg, handle, []jetstream.Msg{m})
		}
	}
}

// handleRecovered runs handle, returning its panic, if any.
func handleRecovered(ctx context.Context, handle func(context.Context, []jetstream.Msg), b []jetstream.Msg) *recovery.Panic {
	_, err := recovery.Call(func() (struct{}, error) { handle(ctx, b); return struct{}{}, nil })
	p, _ := errors.AsType[*recovery.Panic](err)
	return p
}

// maxPanicDelay bounds the wait before a message that panicked comes again.
const maxPanicDelay = time.Minute

// giveBack hands back a message whose handling panicked, to come again after RetryDelay,
// doubled at each delivery up to maxPanicDelay: a bug it trips every time then costs a try and a
// stack in the log a minute, and a release that fixes it applies it.
func giveBack(cfg Config, m jetstream.Msg) {
	delay := cfg.RetryDelay
	if md, err := m.Metadata(); err == nil {
		for n := uint64(1); n < md.NumDelivered && delay > 0 && delay < maxPanicDelay; n++ {
			delay *= 2
		}
	}
	delay = min(delay, maxPanicDelay)
	cfg.Logger.Warn(cfg.Name+": message handed back after a panic", "subject", m.Subject(), "retry_in", delay.String())
	if err := m.NakWithDelay(delay); err != nil {
		cfg.Logger.Warn(cfg.Name+": hand back message", "subject", m.Subject(), "error", err)
	}
}

// handBack gives messages back at once, for another planner.
func handBack(cfg Config, msgs []jetstream.Msg) {
	for _, m := range msgs {
		if err := m.Nak(); err != nil {
			cfg.Logger.Warn(cfg.Name+": hand back message", "subject", m.Subject(), "error", err)
		}
	}
}

// release stops the iterator and hands back what it had already received, so another planner
// gets it now rather than after the consumer's AckWait.
func release(cfg Config, it jetstream.MessagesContext) {
	it.Drain()
	for {
		msg, err := it.Next(jetstream.NextMaxWait(time.Second))
		if err != nil {
			return
		}
		if err := msg.Nak(); err != nil {
			cfg.Logger.Warn(cfg.Name+": hand back message", "subject", msg.Subject(), "error", err)
		}
	}
}
