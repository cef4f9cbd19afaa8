// Package intake applies the job definitions clients publish on <prefix>.jobs.<collection>.<job>
// (docs/nats-api.md): the intake stream keeps them while no planner runs, and every planner
// pulls from one durable consumer of it, many at a time, and applies them in batches
// (jobs.Service.Apply). Order still holds where it matters: every change carries its place in
// the stream, and a change older than the last one applied to its job changes nothing
// (store.PutJob), so a put and a later delete of the same job end deleted whichever planner
// applies which first.
//
// A message is settled by what became of it:
//   - stored, deleted (a delete of a missing job included) or stale: acknowledged;
//   - refused (invalid, unknown collection, quota): acknowledged too, since sending it again
//     cannot help; the service has published the rejected event with the errors;
//   - failed inside the planner (Redis down): negatively acknowledged with a delay, so it comes
//     back and nothing is lost;
//   - a subject that names no job, or an unknown operation: terminated (and erased), with a
//     log line; an unknown operation is reported as a rejected event too.
//
// Bodies are never logged: they can hold secrets. For the same reason, with Erase set (the
// planner seals secrets), a message that held secrets, or was refused, is erased from the
// stream, its bytes overwritten on disk, before it is acknowledged: acknowledging alone removes
// it from the work queue but leaves the bytes in the stream's files until they are compacted.
package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/services/planner/internal/pull"
	"github.com/resched/resched/services/planner/internal/store"
)

// Jobs is what the intake needs of the jobs service.
type Jobs interface {
	Apply(ctx context.Context, changes []jobs.Change) []jobs.Outcome
}

// Publisher publishes the intake's events (a *nats.Conn).
type Publisher interface {
	Publish(subject string, data []byte) error
}

// Config gathers an Intake's dependencies and settings.
type Config struct {
	JS       jetstream.JetStream
	Jobs     Jobs
	Subjects bus.Subjects
	Logger   *slog.Logger
	// Events, when set, has the intake's own events published: deferred, for a change Redis
	// refused, and rejected, for an unknown operation (the service reports the other refusals).
	Events Publisher
	// Clock dates the intake's events (time.Now when nil).
	Clock func() time.Time
	// Erase overwrites, in the stream's storage, each message that held secrets or was refused.
	Erase bool

	// RetryDelay is how long a message that failed inside the planner waits before it is
	// delivered again, and how long Run waits before resuming after losing its consumer.
	// Default 1 s.
	RetryDelay time.Duration
	// Timeout bounds the handling of one batch; it stays below the consumer's AckWait so a
	// message is settled before the server would hand it to another planner. Default 20 s.
	Timeout time.Duration
	// Batch is the most definitions applied in one round trip to Redis (default 256), Handlers
	// how many batches one planner applies at once (default 4).
	Batch, Handlers int
	// Consuming, when set, is true while the consumer is set up and pulled (pull.Config).
	Consuming *atomic.Bool
	// MakeStreams, when set, makes the streams again when the set-up finds none (pull.Config.Missing).
	MakeStreams func(context.Context) error
}

// Intake consumes the intake stream.
type Intake struct {
	cfg    Config
	log    *slog.Logger
	prefix string // <prefix>.jobs.

	mu       sync.Mutex
	stream   jetstream.Stream // the intake stream: its creation time and, for Erase, its messages
	lastSeq  uint64           // the highest sequence seen in the stream
	lastTime time.Time        // the latest message time seen in it
}

// New returns an Intake. The stream must exist (bus.EnsureStreams) before Run.
func New(cfg Config) *Intake {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 20 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Handlers <= 0 {
		cfg.Handlers = 4
	}
	return &Intake{cfg: cfg, log: cfg.Logger, prefix: cfg.Subjects.Prefix + ".jobs."}
}

// Run applies definitions until ctx ends, then returns nil once the batches in hand are
// settled. It returns an error only when the NATS connection is closed; the consumer is set up
// until that works, at start and whenever it is lost (deleted, a server restart).
func (in *Intake) Run(ctx context.Context) error {
	return pull.RunBatches(ctx, pull.Config{
		Name: "intake", JS: in.cfg.JS, Stream: in.cfg.Subjects.IntakeStream(), Consumer: bus.IntakeConsumerConfig(),
		RetryDelay: in.cfg.RetryDelay, Logger: in.log, Batch: in.cfg.Batch, Handlers: in.cfg.Handlers, Consuming: in.cfg.Consuming,
		Missing: in.cfg.MakeStreams,
	}, in.handle)
}

// handle applies a batch and settles every message of it. The work is not cut short when ctx
// ends: the batch in hand is finished, within Timeout. After a panic, package pull hands the
// batch's messages over again one at a time: a change applied already is recognised by its
// stamp.
func (in *Intake) handle(ctx context.Context, msgs []jetstream.Msg) {
	work, cancel := context.WithTimeout(context.WithoutCancel(ctx), in.cfg.Timeout)
	defer cancel()
	changes := make([]jobs.Change, 0, len(msgs))
	kept := make([]jetstream.Msg, 0, len(msgs))
	for _, msg := range msgs {
		ch, ok := in.change(work, msg)
		if !ok {
			in.erase(work, msg) // nothing will apply it, and its body may hold secrets
			in.settle(msg, msg.Term())
			continue
		}
		changes = append(changes, ch)
		kept = append(kept, msg)
	}
	if len(changes) == 0 {
		return
	}
	for i, o := range in.cfg.Jobs.Apply(work, changes) {
		in.settleOutcome(work, kept[i], changes[i], o)
	}
}

// change reads a message as a change; false for one that names no job or an unknown operation.
func (in *Intake) change(ctx context.Context, msg jetstream.Msg) (jobs.Change, bool) {
	c, j, ok := in.names(msg.Subject())
	if !ok {
		// No job to publish an event on: the log is the only word of it.
		in.log.Warn("intake: subject is not <prefix>.jobs.<collection>.<job>; message dropped", "subject", msg.Subject())
		return jobs.Change{}, false
	}
	md, mdErr := msg.Metadata()
	op := msg.Headers().Get(bus.HeaderOperation)
	if op != "" && !strings.EqualFold(op, "put") && !strings.EqualFold(op, "delete") {
		in.log.Info("intake: unknown operation refused", "collection", c, "job", j, "operation", op)
		e := bus.Event{Kind: bus.EventRejected, Collection: c, Job: j, Time: in.cfg.Clock().UTC(),
			Errors: []bus.ErrorEntry{{Path: bus.HeaderOperation, Message: fmt.Sprintf("unknown operation %q: must be delete, or put (the same as no header)", op)}}}
		if mdErr == nil {
			e.IntakeSequence = md.Sequence.Stream
		}
		in.publish(e)
		return jobs.Change{}, false
	}
	ch := jobs.Change{Collection: c, Name: j, Raw: msg.Data(), Delete: strings.EqualFold(op, "delete")}
	if mdErr == nil {
		ch.Stamp = in.stamp(ctx, md.Sequence.Stream, md.Timestamp)
	}
	return ch, true
}

// stamp is a message's place in the stream: the stream's creation time and its sequence.
// Without the creation time the change is applied unstamped, as the API applies them.
//
// The creation time is read once, and again when the stream may have been made again: a
// message with a lower sequence than one seen but a later time (a stream's times grow with its
// sequences, so only a new stream gives both). A lower sequence alone is common, since the
// handlers apply batches side by side and messages come back for a retry; reading the stream's
// information for each of those cost a tenth of the intake's CPU with 4 handlers, and with 8
// the intake ran at 6,000 definitions/s rather than 16,000.
func (in *Intake) stamp(ctx context.Context, seq uint64, at time.Time) store.Stamp {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.stream == nil || (seq < in.lastSeq && at.After(in.lastTime)) {
		st, err := in.cfg.JS.Stream(ctx, in.cfg.Subjects.IntakeStream())
		if err != nil {
			in.log.Warn("intake: read the stream's creation time", "error", err)
			return store.Stamp{}
		}
		if in.stream == nil || !st.CachedInfo().Created.Equal(in.stream.CachedInfo().Created) {
			in.lastSeq, in.lastTime = 0, time.Time{} // a new stream: its own sequences
		}
		in.stream = st
	}
	in.lastSeq = max(in.lastSeq, seq)
	if at.After(in.lastTime) {
		in.lastTime = at
	}
	return store.Stamp{Epoch: in.stream.CachedInfo().Created.UnixMilli(), Seq: seq}
}

// intakeStream is the stream's handle, read once.
func (in *Intake) intakeStream(ctx context.Context) (jetstream.Stream, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.stream == nil {
		st, err := in.cfg.JS.Stream(ctx, in.cfg.Subjects.IntakeStream())
		if err != nil {
			return nil, err
		}
		in.stream = st
	}
	return in.stream, nil
}

func (in *Intake) settleOutcome(ctx context.Context, msg jetstream.Msg, ch jobs.Change, o jobs.Outcome) {
	var refused *jobs.Error
	switch {
	case o.Err == nil:
		if in.log.Enabled(ctx, slog.LevelDebug) { // the arguments cost allocations even when not logged
			in.log.Debug("intake: applied", "collection", ch.Collection, "job", ch.Name, "delete", ch.Delete, "stale", o.Stale)
		}
		if o.Secrets {
			in.erase(ctx, msg)
		}
		in.settle(msg, msg.Ack())
	case errors.As(o.Err, &refused):
		if refused.Code == jobs.CodeNotFound && ch.Delete {
			in.settle(msg, msg.Ack()) // a delete of a missing job: what the client wanted
			return
		}
		// Only the code and the number of problems: a problem's message may quote a value.
		in.log.Info("intake: definition refused", "collection", ch.Collection, "job", ch.Name,
			"code", refused.Code, "status", refused.Status, "problems", len(refused.Details))
		in.erase(ctx, msg)
		in.settle(msg, msg.Ack())
	case errors.Is(o.Err, jobs.ErrNotChecked):
		// The batch's checks took half its time: the changes after are handed back, for the
		// next batch, at once.
		in.settle(msg, msg.Nak())
	case store.Moving(o.Err):
		in.log.Info("intake: the job's Redis Cluster slot is moving; retrying", "collection", ch.Collection, "job", ch.Name, "error", o.Err)
		in.settle(msg, msg.NakWithDelay(in.cfg.RetryDelay))
	default:
		if busy := jobs.StoreRefused(o.Err); busy != nil { // Redis full or not answering
			in.deferred(msg, ch, busy.Message)
		} else {
			in.log.Error("intake: apply failed; retrying", "collection", ch.Collection, "job", ch.Name, "error", o.Err)
		}
		in.settle(msg, msg.NakWithDelay(in.cfg.RetryDelay))
	}
}

// deferred says, at a change's first delivery only, that Redis refused it and it waits: its
// publisher, waiting for the word (schedctl job publish), hears why instead of nothing, and
// the log has a line a change rather than one each RetryDelay while Redis stays full.
func (in *Intake) deferred(msg jetstream.Msg, ch jobs.Change, reason string) {
	if md, err := msg.Metadata(); err != nil || md.NumDelivered > 1 {
		return
	}
	in.log.Warn("intake: the planners cannot store the change now; it waits on the intake stream",
		"collection", ch.Collection, "job", ch.Name, "reason", reason)
	in.publish(bus.Event{Kind: bus.EventDeferred, Collection: ch.Collection, Job: ch.Name, Time: in.cfg.Clock().UTC(),
		IntakeSequence: ch.Stamp.Seq, Reason: reason})
}

// publish publishes an event of the intake's own, when Events is set.
func (in *Intake) publish(e bus.Event) {
	if in.cfg.Events == nil {
		return
	}
	if err := in.cfg.Events.Publish(in.cfg.Subjects.Event(e.Collection, e.Job, e.Kind), bus.AppendEvent(nil, e)); err != nil {
		in.log.Warn("intake: publish the "+e.Kind+" event", "collection", e.Collection, "job", e.Job, "error", err)
	}
}

// names splits <prefix>.jobs.<collection>.<job>; the names themselves are the service's to check.
func (in *Intake) names(subject string) (c, j string, ok bool) {
	rest, ok := strings.CutPrefix(subject, in.prefix)
	if !ok {
		return "", "", false
	}
	c, j, ok = strings.Cut(rest, ".")
	if !ok || c == "" || j == "" || strings.Contains(j, ".") {
		return "", "", false
	}
	return c, j, true
}

// erase overwrites a settled definition in the stream's storage, when Erase is set. A
// failure is logged and the message acknowledged all the same: the definition is applied.
func (in *Intake) erase(ctx context.Context, msg jetstream.Msg) {
	if !in.cfg.Erase {
		return
	}
	md, err := msg.Metadata()
	var st jetstream.Stream
	if err == nil {
		st, err = in.intakeStream(ctx)
	}
	if err == nil {
		err = st.SecureDeleteMsg(ctx, md.Sequence.Stream)
	}
	if err != nil {
		in.log.Warn("intake: erase the applied definition from the stream", "subject", msg.Subject(), "error", err)
	}
}

func (in *Intake) settle(msg jetstream.Msg, err error) {
	if err != nil {
		in.log.Warn("intake: settle message", "subject", msg.Subject(), "error", err)
	}
}
