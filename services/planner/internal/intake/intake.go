// Package intake applies the job definitions clients publish on <prefix>.jobs.<collection>.<job>
// (docs/nats-api.md): the intake stream keeps them while no planner runs, and every planner
// shares one durable consumer of it that hands out one message at a time, so a put and a later
// delete of the same job apply in the order they were published.
//
// A message is settled by what became of it:
//   - stored or deleted (a delete of a missing job included): acknowledged;
//   - refused (invalid, unknown collection, quota): acknowledged too, since sending it again
//     cannot help; the service has published the rejected event with the errors;
//   - failed inside the planner (Redis down): negatively acknowledged with a delay, so it comes
//     back and nothing is lost;
//   - a subject that names no job, or an unknown operation: terminated, with a log line.
//
// Bodies are never logged: they can hold secrets. For the same reason, with Erase set (the
// planner seals secrets), a message that was applied or refused is erased from the stream,
// its bytes overwritten on disk, before it is acknowledged: acknowledging alone removes it
// from the work queue but leaves the bytes in the stream's files until they are compacted.
package intake

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/services/planner/internal/pull"
	"github.com/resched/resched/shared/job"
)

// Jobs is what the intake needs of the jobs service.
type Jobs interface {
	PutJob(ctx context.Context, c, j string, raw []byte, createOnly bool) (*job.Definition, bool, error)
	DeleteJob(ctx context.Context, c, j string) error
}

// Config gathers an Intake's dependencies and settings.
type Config struct {
	JS       jetstream.JetStream
	Jobs     Jobs
	Subjects bus.Subjects
	Logger   *slog.Logger
	// Erase overwrites each message that was applied or refused in the stream's storage.
	Erase bool

	// RetryDelay is how long a message that failed inside the planner waits before it is
	// delivered again, and how long Run waits before resuming after losing its consumer.
	// Default 1 s.
	RetryDelay time.Duration
	// Timeout bounds the handling of one message; it stays below the consumer's AckWait so a
	// message is settled before the server would hand it to another planner. Default 20 s.
	Timeout time.Duration
}

// Intake consumes the intake stream.
type Intake struct {
	cfg    Config
	log    *slog.Logger
	prefix string           // <prefix>.jobs.
	stream jetstream.Stream // the intake stream, for Erase; looked up at the first message
}

// New returns an Intake. The stream must exist (bus.EnsureStreams) before Run.
func New(cfg Config) *Intake {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 20 * time.Second
	}
	return &Intake{cfg: cfg, log: cfg.Logger, prefix: cfg.Subjects.Prefix + ".jobs."}
}

// Run applies definitions until ctx ends, then returns nil once the message in hand is
// settled. It returns an error when the consumer cannot be set up at start or the NATS
// connection is closed; a consumer lost later (deleted, a server restart) is set up again.
func (in *Intake) Run(ctx context.Context) error {
	return pull.Run(ctx, pull.Config{
		Name: "intake", JS: in.cfg.JS, Stream: in.cfg.Subjects.IntakeStream(), Consumer: bus.IntakeConsumerConfig(),
		Prefetch: 1, RetryDelay: in.cfg.RetryDelay, Logger: in.log,
	}, in.handle)
}

// handle applies one message and settles it. The work is not cut short when ctx ends: the
// message in hand is finished, within Timeout.
func (in *Intake) handle(ctx context.Context, msg jetstream.Msg) {
	c, j, ok := in.names(msg.Subject())
	if !ok {
		in.log.Warn("intake: subject is not <prefix>.jobs.<collection>.<job>; message dropped", "subject", msg.Subject())
		in.settle(msg, msg.Term())
		return
	}
	op := msg.Headers().Get(bus.HeaderOperation)
	if op != "" && !strings.EqualFold(op, "put") && !strings.EqualFold(op, "delete") {
		in.log.Warn("intake: unknown operation; message dropped", "collection", c, "job", j, "operation", op)
		in.settle(msg, msg.Term())
		return
	}
	work, cancel := context.WithTimeout(context.WithoutCancel(ctx), in.cfg.Timeout)
	defer cancel()
	var err error
	if strings.EqualFold(op, "delete") {
		err = in.delete(work, c, j)
	} else {
		_, _, err = in.cfg.Jobs.PutJob(work, c, j, msg.Data(), false)
	}
	var refused *jobs.Error
	switch {
	case err == nil:
		in.log.Debug("intake: applied", "collection", c, "job", j, "operation", strings.ToLower(op))
		in.erase(work, msg)
		in.settle(msg, msg.Ack())
	case errors.As(err, &refused):
		// Only the code and the number of problems: a problem's message may quote a value.
		in.log.Info("intake: definition refused", "collection", c, "job", j,
			"code", refused.Code, "status", refused.Status, "problems", len(refused.Details))
		in.erase(work, msg)
		in.settle(msg, msg.Ack())
	default:
		in.log.Error("intake: apply failed; retrying", "collection", c, "job", j, "error", err)
		in.settle(msg, msg.NakWithDelay(in.cfg.RetryDelay))
	}
}

// delete deletes a job; one already gone is what the client wanted.
func (in *Intake) delete(ctx context.Context, c, j string) error {
	err := in.cfg.Jobs.DeleteJob(ctx, c, j)
	var e *jobs.Error
	if errors.As(err, &e) && e.Code == jobs.CodeNotFound {
		return nil
	}
	return err
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
// handle runs one message at a time, so the stream handle needs no lock.
func (in *Intake) erase(ctx context.Context, msg jetstream.Msg) {
	if !in.cfg.Erase {
		return
	}
	md, err := msg.Metadata()
	if err == nil && in.stream == nil {
		in.stream, err = in.cfg.JS.Stream(ctx, in.cfg.Subjects.IntakeStream())
	}
	if err == nil {
		err = in.stream.SecureDeleteMsg(ctx, md.Sequence.Stream)
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
