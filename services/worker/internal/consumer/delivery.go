package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/recovery"
	"github.com/resched/resched/services/internal/setup"
	"github.com/resched/resched/services/worker/internal/executor"
	"github.com/resched/resched/shared/job"
)

// handle runs one delivery and hands its result to the reporter, which settles the message
// once the result is stored (finish). The slot is then free for the next delivery.
func (c *Consumer) handle(ctx context.Context, msg jetstream.Msg) {
	c.cfg.Metrics.InFlight(1)
	defer c.cfg.Metrics.InFlight(-1)
	// A panic in reading the message or deciding on its attempt (the attempt itself is
	// recovered by the executor) ends this message as a malformed one would end, rather than
	// stopping the worker, and then every worker that takes the message again after it.
	a, err := recovery.Call(func() (executor.Attempt, error) { return c.decode(msg) })
	if err != nil {
		c.malformed(msg, err)
		return
	}
	// The heartbeat runs until the message is settled: a result waiting for the results
	// stream (a stream leader election, a lingering batch) keeps its message this worker's.
	beat := c.heartbeat(msg)
	c.lastStart.Store(time.Now().UnixNano())
	c.running.Add(1)
	dec, err := recovery.Call(func() (executor.Decision, error) { return c.cfg.Executor.Execute(ctx, a) })
	c.running.Add(-1)
	if err != nil {
		beat.stop()
		c.malformed(msg, err)
		return
	}
	if errors.Is(context.Cause(ctx), errAbandoned) {
		beat.stop()
		log := &deliveryLog{base: c.log, a: &a, dec: &dec}
		log.get().Warn("delivery abandoned at stop; handing it back")
		c.settle(log, "nak", msg.Nak())
		return
	}
	c.cfg.Metrics.Attempt(dec.ActionType, dec.Result.Status, dec.Result.EndTime.Sub(dec.Result.StartTime))
	c.results.hand(dec.Result, func(published error) {
		c.finish(ctx, msg, &a, &dec, beat, published)
	})
}

// finish settles a due message once its result's publish has an outcome: stored, as the
// executor decided; not stored, the result is published again later (storeAgain). It runs in
// the reporter's goroutine that awaits the result's batch, so it never waits on the network
// itself. The heartbeat runs until the message is settled.
func (c *Consumer) finish(ctx context.Context, msg jetstream.Msg, a *executor.Attempt, dec *executor.Decision, b *beat, published error) {
	log := &deliveryLog{base: c.log, a: a, dec: dec}
	if published != nil {
		c.later.Go(func() { c.storeAgain(ctx, msg, a, dec, b, log, published) })
		return
	}
	level := slog.LevelDebug // successes are many and the results stream has them all
	if dec.Err != nil {
		level = slog.LevelInfo
	}
	if c.log.Enabled(ctx, level) {
		log.get().Log(ctx, level, "attempt", "status", dec.Result.Status, "verdict", dec.Verdict.String(),
			"retry_in", dec.Delay.String(), "final", dec.Result.Final, "faulted", dec.Result.Faulted, "error", errString(dec.Err))
	}
	switch dec.Verdict {
	case executor.Retry:
		b.stop()
		c.cfg.Metrics.Retry(dec.ActionType)
		c.settle(log, "nak", msg.NakWithDelay(dec.Delay))
	case executor.Escalate:
		// Publishing the error action's message waits for the stream: in a goroutine of its
		// own, so that the batch's other deliveries are not held (Run waits for it).
		c.later.Go(func() { c.escalate(ctx, msg, a, b, log) })
	default:
		b.stop()
		c.settle(log, "ack", msg.Ack())
	}
}

// storeAgain publishes the result of an attempt that the results stream did not take (its
// storage full, a leader lost for longer than PublishTimeout), alone, until it is stored, then
// settles the due message as the attempt decided; the heartbeat keeps the message this
// worker's meanwhile. The attempt is not run again: its target had its call, and running it
// again called the target once more for each refusal, each call a delivery that numbered the
// attempts (a results stream refusing for a while used up retries the target never failed),
// with only the last in the history.
func (c *Consumer) storeAgain(ctx context.Context, msg jetstream.Msg, a *executor.Attempt, dec *executor.Decision, b *beat, log *deliveryLog, err error) {
	rm := c.results.message([]report{{r: dec.Result}}, 0)
	if c.republish(ctx, msg, a, b, log, "publish_result", "result not published", err, func() error { return c.publish(ctx, rm) }) {
		c.finish(ctx, msg, a, dec, b, nil)
	}
}

// escalate schedules the error action (a message of its own) and then acknowledges the main
// one. An error action the due stream does not take is published again, as a result is.
func (c *Consumer) escalate(ctx context.Context, msg jetstream.Msg, a *executor.Attempt, b *beat, log *deliveryLog) {
	if c.removed(ctx, msg) {
		b.stop()
		log.get().Info("the job was deleted while its attempt ran: its error action is not run")
		c.settle(log, "ack", msg.Ack())
		return
	}
	em := errorPhaseMsg(msg, a.Due)
	publish := func() error { return c.publish(ctx, em) }
	if err := publish(); err == nil || c.republish(ctx, msg, a, b, log, "publish_error_action", "error action not scheduled", err, publish) {
		b.stop()
		c.settle(log, "ack", msg.Ack())
	}
}

// removed reports whether msg is no longer on the due stream. The planners remove what the
// stream holds for a job when it or its collection is deleted, the message a worker holds
// too; an error action published after that (a new message) ran for the deleted job. Any
// other answer, NATS unreachable among them, is no proof: the error action is scheduled.
func (c *Consumer) removed(ctx context.Context, msg jetstream.Msg) bool {
	md, err := msg.Metadata()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
	defer cancel()
	st, err := c.cfg.JS.Stream(ctx, md.Stream)
	if err != nil {
		return false
	}
	_, err = st.GetMsg(ctx, md.Sequence.Stream)
	return errors.Is(err, jetstream.ErrMsgNotFound)
}

// republish calls publish again after err (what, counted as an error of stage) until it
// stores the message (true), waiting againAfter between calls, the due message kept in
// progress by b. Otherwise it settles the message itself and returns false: refused for its
// size even cut (reporter.alone), it can never be stored and the attempt runs again; at a stop
// (ctx ended after StopTimeout) the message is handed back, and another worker runs it again.
func (c *Consumer) republish(ctx context.Context, msg jetstream.Msg, a *executor.Attempt, b *beat, log *deliveryLog, stage, what string, err error, publish func() error) bool {
	for n := 1; ; n++ {
		if bus.TooLarge(err) {
			b.stop()
			c.runAgain(msg, a, log, stage, what, err)
			return false
		}
		c.cfg.Metrics.Error(stage)
		delay := c.againAfter(n)
		log.get().Error(what+"; publishing it again", "retry_in", delay.String(), "error", err)
		if !setup.Wait(ctx, delay) {
			b.stop()
			c.settle(log, "nak", msg.Nak())
			return false
		}
		if err = publish(); err == nil {
			return true
		}
	}
}

// runAgain has the attempt of msg run again after againAfter, since its outcome (what, counted
// as an error of stage) can never be stored as it is.
func (c *Consumer) runAgain(msg jetstream.Msg, a *executor.Attempt, log *deliveryLog, stage, what string, err error) {
	c.cfg.Metrics.Error(stage)
	delay := c.againAfter(a.Delivery)
	log.get().Error(what+"; the attempt will run again", "retry_in", delay.String(), "error", err)
	c.settle(log, "nak", msg.NakWithDelay(delay))
}

// maxAgain bounds the wait before an outcome that could not be stored is published again.
const maxAgain = time.Minute

// againAfter is the wait before the n'th publish again of an outcome (a result, an error
// action) that could not be stored: RetryDelay, doubling each time up to maxAgain, so that a
// stream refusing for long (JetStream's storage full) is not asked every RetryDelay.
func (c *Consumer) againAfter(n int) time.Duration {
	d := c.cfg.RetryDelay
	for i := 1; i < n && d < maxAgain; i++ {
		d *= 2
	}
	return min(d, maxAgain)
}

// deliveryLog builds the logger of a delivery on its first use: most deliveries log nothing,
// and building it (slog.Logger.With) cost a few per cent of a delivery.
type deliveryLog struct {
	base    *slog.Logger
	a       *executor.Attempt  // nil for a malformed message
	dec     *executor.Decision // with a
	subject string             // without a
	l       *slog.Logger
}

func (d *deliveryLog) get() *slog.Logger {
	if d.l == nil {
		if d.a == nil {
			d.l = d.base.With("subject", d.subject)
		} else {
			d.l = d.base.With("collection", d.a.Due.Collection, "job", d.a.Due.Job, "occurrence", d.a.Due.Occurrence,
				"action", d.dec.Result.ActionName, "type", d.dec.ActionType, "attempt", d.dec.Result.Attempt)
		}
	}
	return d.l
}

// decode reads a due message: its occurrence (which must name the job of its subject), its
// phase and its delivery count.
func (c *Consumer) decode(msg jetstream.Msg) (executor.Attempt, error) {
	md, err := msg.Metadata()
	if err != nil {
		return executor.Attempt{}, fmt.Errorf("metadata: %w", err)
	}
	d, err := bus.DecodeDue(msg.Data())
	if err != nil {
		return executor.Attempt{}, err
	}
	// The action is decoded here, once. When that fails, or the action is null, the executor
	// is given none and judges the raw action as it always did.
	var act *job.Action
	if len(d.Action) > 0 && string(d.Action) != "null" {
		if a, err := bus.DecodeAction(d.Action); err == nil {
			act = a
		}
	}
	if want := c.cfg.Subjects.Due(d.Collection, d.Job); msg.Subject() != want {
		return executor.Attempt{}, fmt.Errorf("occurrence of %s/%s on subject %s", d.Collection, d.Job, msg.Subject())
	}
	phase := executor.PhaseMain
	switch p := msg.Headers().Get(HeaderPhase); p {
	case "":
	case phaseError:
		phase = executor.PhaseError
	default:
		return executor.Attempt{}, fmt.Errorf("unknown %s %q", HeaderPhase, p)
	}
	return executor.Attempt{Due: d, Action: act, Phase: phase, Delivery: int(md.NumDelivered)}, nil
}

func (c *Consumer) malformed(msg jetstream.Msg, err error) {
	c.cfg.Metrics.Error("malformed")
	log := &deliveryLog{base: c.log, subject: msg.Subject()}
	if p, ok := errors.AsType[*recovery.Panic](err); ok {
		p.Log(log.get(), "due message")
	}
	log.get().Warn("malformed due message terminated", "error", err)
	c.settle(log, "term", msg.TermWithReason("malformed"))
}

func (c *Consumer) settle(log *deliveryLog, how string, err error) {
	if err != nil {
		c.cfg.Metrics.Error(how)
		log.get().Warn("settling the due message failed; it will be redelivered", "how", how, "error", err)
	}
}

// heartbeat tells the server the delivery is in progress every third of AckWait, so a long
// delivery is not handed to another worker meanwhile, until its stop. A timer re-armed after
// each beat, rather than a goroutine and a ticker per delivery: nearly every delivery ends
// before the first beat, and then the timer is all it cost.
func (c *Consumer) heartbeat(msg jetstream.Msg) *beat {
	b := &beat{msg: msg, period: c.cfg.AckWait / 3, metrics: c.cfg.Metrics}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timer = time.AfterFunc(b.period, b.fire)
	return b
}

// beat is the heartbeat of one delivery.
type beat struct {
	msg     jetstream.Msg
	period  time.Duration
	metrics Metrics

	mu      sync.Mutex // held through a beat, so none is sent after stop returns
	timer   *time.Timer
	stopped bool
}

func (b *beat) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	if err := b.msg.InProgress(); err != nil {
		b.metrics.Error("in_progress")
	}
	b.timer.Reset(b.period)
}

// stop ends the heartbeat; a beat under way is waited for.
func (b *beat) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	b.timer.Stop()
}

// publish publishes to JetStream and waits for the stream's acknowledgement, trying three
// times within ctx.
func (c *Consumer) publish(ctx context.Context, m *nats.Msg) error {
	var err error
	for try := range 3 {
		if try > 0 {
			t := time.NewTimer(time.Duration(try) * 200 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return errors.Join(err, context.Cause(ctx))
			case <-t.C:
			}
		}
		pctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
		_, err = c.cfg.JS.PublishMsg(pctx, m)
		cancel()
		if err == nil || ctx.Err() != nil || bus.TooLarge(err) { // the same message is refused again
			return err
		}
	}
	return err
}

// errorPhaseMsg is the occurrence again, for its error action. Its id, the occurrence's own
// followed by ".error", drops a second one published after a crash between this publish and
// the acknowledgement of the main message. The occurrence's own id is the main message's: a
// run-now's is not that of the scheduled occurrence of its millisecond, so their error
// actions do not collide either.
func errorPhaseMsg(main jetstream.Msg, d bus.Due) *nats.Msg {
	m := nats.NewMsg(main.Subject())
	m.Data = main.Data()
	m.Header.Set(HeaderPhase, phaseError)
	id := main.Headers().Get(bus.HeaderMsgID)
	if id == "" { // published by a client other than a planner
		id = bus.MsgID(d.Collection, d.Job, d.Incarnation, d.Scheduled)
	}
	m.Header.Set(bus.HeaderMsgID, id+"."+phaseError)
	return m
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimSpace(err.Error())
}
