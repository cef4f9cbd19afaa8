package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/worker/internal/executor"
)

// handle runs one delivery and settles its message.
func (c *Consumer) handle(ctx context.Context, msg jetstream.Msg) {
	c.cfg.Metrics.InFlight(1)
	defer c.cfg.Metrics.InFlight(-1)
	a, err := c.decode(msg)
	if err != nil {
		c.malformed(msg, err)
		return
	}
	stopBeat := c.heartbeat(msg)
	dec, err := c.cfg.Executor.Execute(ctx, a)
	stopBeat()
	if err != nil {
		c.malformed(msg, err)
		return
	}
	log := c.log.With("collection", a.Due.Collection, "job", a.Due.Job, "occurrence", a.Due.Occurrence,
		"action", dec.Result.ActionName, "type", dec.ActionType, "attempt", dec.Result.Attempt)
	if errors.Is(context.Cause(ctx), errAbandoned) {
		log.Warn("delivery abandoned at stop; handing it back")
		c.settle(log, "nak", msg.Nak())
		return
	}
	c.cfg.Metrics.Attempt(dec.ActionType, dec.Result.Status, dec.Result.EndTime.Sub(dec.Result.StartTime))
	if err := c.publish(ctx, resultMsg(c.cfg.Subjects, dec.Result)); err != nil {
		c.cfg.Metrics.Error("publish_result")
		log.Error("result not published; the attempt will run again", "error", err)
		c.settle(log, "nak", msg.NakWithDelay(c.cfg.RetryDelay))
		return
	}
	level := slog.LevelDebug // successes are many and the results stream has them all
	if dec.Err != nil {
		level = slog.LevelInfo
	}
	log.Log(ctx, level, "attempt", "status", dec.Result.Status, "verdict", dec.Verdict.String(), "retry_in", dec.Delay.String(),
		"final", dec.Result.Final, "faulted", dec.Result.Faulted, "error", errString(dec.Err))
	switch dec.Verdict {
	case executor.Retry:
		c.cfg.Metrics.Retry(dec.ActionType)
		c.settle(log, "nak", msg.NakWithDelay(dec.Delay))
	case executor.Escalate:
		if err := c.publish(ctx, errorPhaseMsg(msg, a.Due)); err != nil {
			c.cfg.Metrics.Error("publish_error_action")
			log.Error("error action not scheduled; the attempt will run again", "error", err)
			c.settle(log, "nak", msg.NakWithDelay(c.cfg.RetryDelay))
			return
		}
		c.settle(log, "ack", msg.Ack())
	default:
		c.settle(log, "ack", msg.Ack())
	}
}

// decode reads a due message: its occurrence (which must name the job of its subject), its
// phase and its delivery count.
func (c *Consumer) decode(msg jetstream.Msg) (executor.Attempt, error) {
	md, err := msg.Metadata()
	if err != nil {
		return executor.Attempt{}, fmt.Errorf("metadata: %w", err)
	}
	var d bus.Due
	if err := json.Unmarshal(msg.Data(), &d); err != nil {
		return executor.Attempt{}, fmt.Errorf("not a due occurrence: %w", err)
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
	return executor.Attempt{Due: d, Phase: phase, Delivery: int(md.NumDelivered)}, nil
}

func (c *Consumer) malformed(msg jetstream.Msg, err error) {
	c.cfg.Metrics.Error("malformed")
	log := c.log.With("subject", msg.Subject())
	log.Warn("malformed due message terminated", "error", err)
	c.settle(log, "term", msg.TermWithReason("malformed"))
}

func (c *Consumer) settle(log *slog.Logger, how string, err error) {
	if err != nil {
		c.cfg.Metrics.Error(how)
		log.Warn("settling the due message failed; it will be redelivered", "how", how, "error", err)
	}
}

// heartbeat tells the server the delivery is in progress every third of AckWait, so a long
// delivery is not handed to another worker meanwhile. The returned func stops it.
func (c *Consumer) heartbeat(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(c.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					c.cfg.Metrics.Error("in_progress")
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
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
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// resultMsg is the result of an attempt, with the id that drops a re-publish.
func resultMsg(s bus.Subjects, r bus.Result) *nats.Msg {
	data, _ := json.Marshal(r) // a Result always marshals
	m := nats.NewMsg(s.Result(r.Collection, r.Job))
	m.Data = data
	m.Header.Set(bus.HeaderMsgID, bus.ResultMsgID(r))
	return m
}

// errorPhaseMsg is the occurrence again, for its error action. Its id drops a second one
// published after a crash between this publish and the acknowledgement of the main message.
func errorPhaseMsg(main jetstream.Msg, d bus.Due) *nats.Msg {
	m := nats.NewMsg(main.Subject())
	m.Data = main.Data()
	m.Header.Set(HeaderPhase, phaseError)
	m.Header.Set(bus.HeaderMsgID, bus.MsgID(d.Collection, d.Job, d.Scheduled)+"."+phaseError)
	return m
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimSpace(err.Error())
}
