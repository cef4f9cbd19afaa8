// Package results applies the attempt results the workers publish on
// <prefix>.results.<collection>.<job>, or several at once on <prefix>.results.<collection>
// (docs/nats-api.md): each becomes a history entry and moves
// the job's status counters, and the final attempt of a job's last occurrence ends the job
// Completed or Faulted, which is announced on <prefix>.events.<collection>.<job>.<kind>.
//
// Every planner shares one durable consumer of the results stream. A message is settled by
// what became of it:
//   - applied (to a job deleted meanwhile too): acknowledged;
//   - malformed (not a result, or a result of another job than its subject names): terminated,
//     with a log line, since sending it again cannot help;
//   - failed inside the planner (Redis down): negatively acknowledged with a delay, so it
//     comes back and nothing is lost.
//
// Results are applied in batches of those at hand, each in one round trip to Redis, by every
// planner at once: a result is recorded once whatever order they come in (its id is
// remembered), and the history shows the attempts in the order they started.
package results

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/pull"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// Store is what the consumer needs of the planner's store.
type Store interface {
	ApplyResults(ctx context.Context, results []store.Result, now time.Time) []store.ResultApplied
}

// Publisher sends events (core NATS: events are notifications).
type Publisher interface {
	Publish(subject string, data []byte) error
}

// Metrics records what the consumer does; package metrics has the Prometheus one.
type Metrics interface {
	Result(status string)
	Error(stage string)
}

// Config gathers a Consumer's dependencies and settings.
type Config struct {
	JS       jetstream.JetStream
	Store    Store
	Events   Publisher
	Subjects bus.Subjects
	Clock    func() time.Time
	Logger   *slog.Logger
	Metrics  Metrics

	// RetryDelay is how long a result that failed inside the planner waits before it is
	// delivered again, and how long Run waits before resuming after losing its consumer.
	// Default 1 s.
	RetryDelay time.Duration
	// Timeout bounds the handling of one batch of results; it stays below the consumer's
	// AckWait (bus.ResultsAckWait) so a result is settled before the server hands it to
	// another planner. Default 8 s: a Redis failover, a WAIT for replicas (2 s at most) fit.
	Timeout time.Duration
	// Prefetch is how many results the server may push ahead of those in hand. Default 1,024.
	Prefetch int
	// Batch is the most results applied in one round trip to Redis (default 256); Handlers how
	// many batches one planner applies at once (default 2).
	Batch, Handlers int
	// Consuming, when set, is true while the consumer is set up and pulled (pull.Config).
	Consuming *atomic.Bool
	// MakeStreams, when set, makes the streams again when the set-up finds none (pull.Config.Missing).
	MakeStreams func(context.Context) error
}

// Consumer consumes the results stream.
type Consumer struct {
	cfg    Config
	log    *slog.Logger
	prefix string // <prefix>.results.
	// waitSaid is when the consumer last logged that results wait for Redis (unix ns): each
	// waiting result comes back every RetryDelay, and a line for each buried the log.
	waitSaid atomic.Int64
}

// waitLogEvery is how often, at most, the consumer says that results wait for Redis.
const waitLogEvery = time.Minute

// New returns a Consumer. The stream must exist (bus.EnsureStreams) before Run.
func New(cfg Config) *Consumer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 8 * time.Second
	}
	if cfg.Prefetch <= 0 {
		cfg.Prefetch = 1024
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Handlers <= 0 {
		cfg.Handlers = 2
	}
	return &Consumer{cfg: cfg, log: cfg.Logger, prefix: cfg.Subjects.Prefix + ".results."}
}

// Run applies results until ctx ends, then returns nil once the results in hand are settled.
// It returns an error only when the NATS connection is closed; the consumer is set up until
// that works, at start and whenever it is lost (deleted, a server restart).
func (rc *Consumer) Run(ctx context.Context) error {
	return pull.RunBatches(ctx, pull.Config{
		Name: "results", JS: rc.cfg.JS, Stream: rc.cfg.Subjects.ResultsStream(), Consumer: bus.ResultsConsumerConfig(),
		Prefetch: rc.cfg.Prefetch, RetryDelay: rc.cfg.RetryDelay, Logger: rc.log, Batch: rc.cfg.Batch, Handlers: rc.cfg.Handlers, Consuming: rc.cfg.Consuming,
		Missing: rc.cfg.MakeStreams,
	}, rc.handle)
}

// handle applies the results of a batch of messages and settles each message: acknowledged
// once every result it holds is applied, negatively acknowledged when one failed (it comes
// back whole; the results applied already are recognised by their ids). The work is not cut
// short when ctx ends: the batch in hand is finished, within Timeout. After a panic, package
// pull hands the batch's messages over again one at a time.
func (rc *Consumer) handle(ctx context.Context, msgs []jetstream.Msg) {
	var rs []bus.Result
	var from []int                     // from[i] is the message rs[i] came in
	settled := make([]bool, len(msgs)) // terminated as malformed
	for i, msg := range msgs {
		got, err := rc.decode(msg)
		if err != nil {
			rc.cfg.Metrics.Error("result_decode")
			rc.log.Warn("results: malformed result dropped", "subject", msg.Subject(), "error", err)
			rc.settle(msg, msg.Term())
			settled[i] = true
			continue
		}
		rs = append(rs, got...)
		for range got {
			from = append(from, i)
		}
	}
	work, cancel := context.WithTimeout(context.WithoutCancel(ctx), rc.cfg.Timeout)
	defer cancel()
	failed := make([]bool, len(msgs))
	debug := rc.log.Enabled(work, slog.LevelDebug)
	for start := 0; start < len(rs); start += rc.cfg.Batch {
		end := min(start+rc.cfg.Batch, len(rs))
		writes := make([]store.Result, 0, end-start)
		for _, r := range rs[start:end] {
			writes = append(writes, store.Result{Collection: r.Collection, Job: r.Job, Outcome: store.Outcome{
				ID: bus.ResultMsgID(r), Entry: r.HistoryEntry(), Scheduled: r.Scheduled, Occurrence: r.Occurrence,
				MainDone: r.MainDone, Tag: r.ExecutionTag, Final: r.Final, Faulted: r.Faulted, Incarnation: r.Incarnation,
				Delivery: r.Delivery, Lost: lostBefore(r),
			}})
		}
		now := rc.cfg.Clock()
		for k, a := range rc.cfg.Store.ApplyResults(work, writes, now) {
			r := rs[start+k]
			if a.Err != nil {
				switch {
				case store.Moving(a.Err): // a reshard: expected, and over when the slot is
					rc.cfg.Metrics.Error("slot_moving")
					rc.log.Info("results: the job's Redis Cluster slot is moving; retrying", "collection", r.Collection, "job", r.Job, "error", a.Err)
				default:
					rc.cfg.Metrics.Error("result_apply")
					if why := redisRefusal(a.Err); why != "" {
						rc.sayWaiting(now, why)
					} else {
						rc.log.Error("results: apply failed; retrying", "collection", r.Collection, "job", r.Job, "error", a.Err)
					}
				}
				failed[from[start+k]] = true
				continue
			}
			rc.cfg.Metrics.Result(string(r.Status))
			for range a.Lost {
				rc.cfg.Metrics.Result(resultLost)
			}
			if debug { // asked once a batch: the arguments allocate even when the line is not written
				rc.log.Debug("results: applied", "collection", r.Collection, "job", r.Job, "action", r.ActionName,
					"attempt", r.Attempt, "status", r.Status, "final", r.Final, "faulted", r.Faulted)
			}
			rc.announce(r, a.State, now, debug)
		}
	}
	for i, msg := range msgs {
		switch {
		case settled[i]:
		case failed[i]:
			rc.settle(msg, msg.NakWithDelay(rc.cfg.RetryDelay))
		default:
			rc.settle(msg, msg.Ack())
		}
	}
}

// redisRefusal says why Redis did not take a result when it is Redis's state, not the result's
// ("" otherwise): full, or not answering.
func redisRefusal(err error) string {
	switch {
	case store.OutOfMemory(err):
		return "Redis is at its maxmemory"
	case store.Unavailable(err):
		return "Redis does not answer"
	}
	return ""
}

// sayWaiting logs why results wait for Redis, at most once every waitLogEvery.
func (rc *Consumer) sayWaiting(now time.Time, why string) {
	last := rc.waitSaid.Load()
	if now.UnixNano()-last < int64(waitLogEvery) || !rc.waitSaid.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	rc.log.Warn("results: " + why + "; the results wait in their stream and are applied once it takes them (docs/operations.md, Redis)")
}

// decode reads a message's results: one on <prefix>.results.<collection>.<job>, naming that
// job, or an array of them on <prefix>.results.<collection>, each naming a job of that
// collection. A result that cannot be applied is dropped with a log line; a message with
// none that can is malformed.
func (rc *Consumer) decode(msg jetstream.Msg) ([]bus.Result, error) {
	c, j, ok := rc.names(msg.Subject())
	if !ok {
		return nil, errors.New("subject is not <prefix>.results.<collection>[.<job>]")
	}
	if j != "" {
		r, err := bus.DecodeResult(msg.Data())
		if err == nil {
			err = check(r, c, j)
		}
		if err != nil {
			return nil, err
		}
		return []bus.Result{r}, nil
	}
	rs, err := bus.DecodeResults(msg.Data())
	if err != nil {
		return nil, err
	}
	kept := rs[:0]
	for _, r := range rs {
		if err := check(r, c, r.Job); err != nil {
			rc.cfg.Metrics.Error("result_decode")
			rc.log.Warn("results: malformed result dropped from a batch", "subject", msg.Subject(), "error", err)
			continue
		}
		kept = append(kept, r)
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("none of the %d results can be applied", len(rs))
	}
	return kept, nil
}

// check tells why r cannot be applied as a result of job c/j.
func check(r bus.Result, c, j string) error {
	var problems []string
	if r.Collection != c || r.Job != j {
		problems = append(problems, fmt.Sprintf("names job %q/%q, subject names %q/%q", r.Collection, r.Job, c, j))
	}
	if err := bus.CheckName("collection", c); err != nil {
		problems = append(problems, err.Error())
	}
	if err := bus.CheckName("job", j); err != nil {
		problems = append(problems, err.Error())
	}
	if r.ActionName == "" {
		problems = append(problems, "no actionName")
	}
	if r.Status == "" {
		problems = append(problems, "no status")
	}
	if r.Scheduled.IsZero() {
		problems = append(problems, "no scheduledTime")
	}
	if r.Attempt < 0 || r.Occurrence < 0 {
		problems = append(problems, "negative attempt or occurrence")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// names splits <prefix>.results.<collection>.<job>, or <prefix>.results.<collection> (then j
// is "").
func (rc *Consumer) names(subject string) (c, j string, ok bool) {
	rest, ok := strings.CutPrefix(subject, rc.prefix)
	if !ok {
		return "", "", false
	}
	c, j, _ = strings.Cut(rest, ".")
	if c == "" || strings.Contains(j, ".") || strings.HasSuffix(rest, ".") {
		return "", "", false
	}
	return c, j, true
}

// announce publishes the completed or faulted event of a job this result ended. A lost event
// is logged only: the state it reports is already stored.
func (rc *Consumer) announce(r bus.Result, state job.State, now time.Time, debug bool) {
	var kind string
	switch state {
	case job.StateCompleted:
		kind = bus.EventCompleted
	case job.StateFaulted:
		kind = bus.EventFaulted
	default:
		return
	}
	if debug {
		// Not at info: a burst of one-time jobs would write a line per job, and the end is
		// already an event on the bus, the job's state and its history's last entry.
		rc.log.Debug("results: job ended", "collection", r.Collection, "job", r.Job, "state", state)
	}
	if rc.cfg.Events == nil {
		return
	}
	b := bus.AppendEvent(nil, bus.Event{Kind: kind, Collection: r.Collection, Job: r.Job, Time: now.UTC()})
	if err := rc.cfg.Events.Publish(rc.cfg.Subjects.Event(r.Collection, r.Job, kind), b); err != nil {
		rc.cfg.Metrics.Error("event")
		rc.log.Warn("results: publish event", "kind", kind, "collection", r.Collection, "job", r.Job, "error", err)
	}
}

func (rc *Consumer) settle(msg jetstream.Msg, err error) {
	if err != nil {
		rc.log.Warn("results: settle message", "subject", msg.Subject(), "error", err)
	}
}

type noMetrics struct{}

func (noMetrics) Result(string) {}
func (noMetrics) Error(string)  {}
