// Package action defines how a worker delivers one attempt of a job's action: one Deliverer
// per action type (HTTP, Storage Queue, Service Bus), each passing the conformance suite in
// actiontest. A Deliverer knows nothing of NATS, retries or history; the executor does.
package action

import (
	"context"
	"errors"
	"time"

	"github.com/resched/resched/shared/job"
)

// Meta is what identifies an attempt to the target (docs/nats-api.md, "What a target receives").
type Meta struct {
	Collection      string
	Job             string
	Scheduled       time.Time // x-ms-scheduler-expected-execution-time
	ExecutionTag    string    // same for every attempt of the occurrence
	ClientRequestID string    // new for every attempt
	Occurrence      int
	Attempt         int // 0 for the first attempt
	Region          string
}

// ExpectedExecutionTime is Scheduled as targets receive it: RFC 3339 in UTC, with milliseconds
// only when the time has them. A schedule's executions are whole seconds and print as the
// original did; a job put without a startTime runs first at the millisecond it was accepted, and
// a header cut to the second would tell its target it ran up to a second later than it did.
func (m Meta) ExpectedExecutionTime() string { return m.Scheduled.UTC().Format(expectedTimeLayout) }

// expectedTimeLayout is the layout of ExpectedExecutionTime.
const expectedTimeLayout = "2006-01-02T15:04:05.999Z07:00"

// Bounded returns ctx ended by the time-out d from now. A ctx that already ends as soon is
// returned as it is, with a cancel that does nothing: the executor bounds every attempt by the
// same time-out, and a second timer context per delivery cost an allocation, a timer and a
// registration under the parent's lock for nothing.
func Bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if end, ok := ctx.Deadline(); ok && time.Until(end) <= d {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// Deliverer delivers one attempt. It returns the history message summarising what the target
// answered, and an error when the attempt failed; wrap the error with Permanent when retrying
// cannot help (a definition the target can never accept, e.g. an unreadable certificate).
type Deliverer interface {
	Deliver(ctx context.Context, a *job.ActionSpec, m Meta) (message string, err error)
}

// permanent marks an error that retries cannot fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// Registry picks the Deliverer of an action type.
type Registry map[job.ActionType]Deliverer

// Deliver runs the Deliverer of a.Type, or fails permanently when none is registered.
func (r Registry) Deliver(ctx context.Context, a *job.ActionSpec, m Meta) (string, error) {
	d, ok := r[a.Type]
	if !ok {
		return "", Permanent(errors.New("no deliverer for action type " + string(a.Type)))
	}
	return d.Deliver(ctx, a, m)
}
