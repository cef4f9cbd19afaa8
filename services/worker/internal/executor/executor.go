// Package executor runs one attempt of a due occurrence and decides what follows it: done,
// retry after the policy's interval, or hand over to the error action. It knows nothing of
// NATS; the consumer turns a Decision into an acknowledgement and publishes its Result.
//
// Attempts are numbered from the JetStream delivery count of the due message, so a retry
// scheduled with a delayed negative acknowledgement survives a worker restart: delivery n
// is attempt n-1, from 0 to the policy's retry count. The error action runs from a message
// of its own (the consumer publishes it when a Decision says Escalate), so its attempts are
// numbered from 0 again and a permanent failure can skip the main action's remaining
// retries without upsetting the count.
package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/recovery"
	"github.com/resched/resched/services/internal/secrets"
	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/shared/job"
)

// DefaultMinRetryInterval is the shortest wait between two attempts unless configured.
const DefaultMinRetryInterval = 15 * time.Second

// MaxResultMessage bounds the message of a result (the target's answer, an error). History
// keeps 2,048 bytes of it by default (the planner's history message size), but a target's
// response headers are bounded only by net/http's 10 MiB, and a result larger than NATS's
// max_payload (1 MiB by default) would be refused at every attempt, which then ran again
// forever. JSON may escape it to six times its bytes at worst (control characters).
const MaxResultMessage = 8 << 10

// ErrMalformed marks a due message that cannot be executed at all: sending it again cannot
// help, so the consumer terminates it.
var ErrMalformed = errors.New("malformed due occurrence")

// Deliverer delivers one attempt of an action; action.Registry is the worker's.
type Deliverer interface {
	Deliver(ctx context.Context, a *job.ActionSpec, m action.Meta) (string, error)
}

// Opener opens the sealed secrets of a job's action in place; secrets.Keyring is the
// worker's (a nil keyring opens none, and fails on a sealed one).
type Opener interface {
	OpenAction(a *job.Action, collection, job string) error
}

// Phase says which action a due message runs.
type Phase int

// The phases.
const (
	PhaseMain  Phase = iota // the job's action
	PhaseError              // its errorAction, after the main action failed through every retry
)

func (p Phase) String() string {
	if p == PhaseError {
		return "error"
	}
	return "main"
}

// Verdict is what the consumer does with the due message after the attempt.
type Verdict int

// The verdicts.
const (
	// Ack: the occurrence is done, by a success or by giving up.
	Ack Verdict = iota + 1
	// Retry: negatively acknowledge with Decision.Delay; the next delivery is the next attempt.
	Retry
	// Escalate: publish the occurrence again for PhaseError, then acknowledge this message.
	Escalate
)

func (v Verdict) String() string {
	switch v {
	case Ack:
		return "ack"
	case Retry:
		return "retry"
	case Escalate:
		return "escalate"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Attempt is one delivery of a due message.
type Attempt struct {
	Due bus.Due
	// Action is Due.Action decoded, when the caller has decoded it with the rest of the
	// message; nil: Execute decodes Due.Action.
	Action   *job.Action
	Phase    Phase
	Delivery int // the JetStream delivery count, from 1
}

// Decision is the outcome of an attempt.
type Decision struct {
	Verdict    Verdict
	Delay      time.Duration  // before the next attempt, with Retry
	Result     bus.Result     // to publish before the due message is settled
	ActionType job.ActionType // of the action that ran, for metrics
	Err        error          // why the attempt failed; nil when it completed
}

// Config gathers an Executor's dependencies and settings.
type Config struct {
	Deliverer Deliverer
	// Secrets opens the sealed secrets of an action before it is delivered; nil: the worker
	// has no keys (a sealed secret then fails its attempt, naming the key it needs).
	Secrets Opener
	// MinRetryInterval is a floor under every retry interval; default 15 s.
	MinRetryInterval time.Duration
	// Timeout bounds one attempt, whatever its action type; 0 leaves it to the deliverer.
	Timeout time.Duration
	// Region is told to targets that carry it (the Storage Queue envelope).
	Region string
	// Clock tells the start and end of attempts; default time.Now.
	Clock func() time.Time
	// NewRequestID makes the x-ms-client-request-id of an attempt; default NewRequestID.
	NewRequestID func() string
	// Logger has the stack of an attempt that panicked; default: discarded.
	Logger *slog.Logger
}

// Executor runs attempts. It is safe for concurrent use.
type Executor struct{ cfg Config }

// New returns an Executor.
func New(cfg Config) *Executor {
	if cfg.MinRetryInterval <= 0 {
		cfg.MinRetryInterval = DefaultMinRetryInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.NewRequestID == nil {
		cfg.NewRequestID = NewRequestID
	}
	if cfg.Secrets == nil {
		cfg.Secrets = (*secrets.Keyring)(nil) // no keys: clear secrets pass, sealed ones fail
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Executor{cfg: cfg}
}

// Execute runs the attempt a stands for and decides what follows. It returns an error
// wrapping ErrMalformed, and no Decision, when the due message cannot be executed.
func (e *Executor) Execute(ctx context.Context, a Attempt) (Decision, error) {
	act, spec, name, err := actionOf(a)
	if err != nil {
		return Decision{}, err
	}
	policy := spec.RetryPolicy
	retries := policy.Count()
	// A delivery past the last attempt follows a crash between that attempt and the
	// acknowledgement of its message: the last attempt runs again (at least once).
	attempt := min(max(a.Delivery-1, 0), retries)
	d := a.Due
	meta := action.Meta{
		Collection: d.Collection, Job: d.Job, Scheduled: d.Scheduled, ExecutionTag: d.ExecutionTag,
		ClientRequestID: e.cfg.NewRequestID(), Occurrence: d.Occurrence, Attempt: attempt, Region: e.cfg.Region,
	}

	start := e.cfg.Clock()
	// A panic in the attempt (a deliverer's bug that this job's action trips) fails this
	// attempt alone, as a target's failure would: the policy's retries and the error action
	// follow, and the worker goes on with the others rather than stopping, and then every
	// worker that takes the occurrence again after it.
	msg, err := recovery.Call(func() (string, error) {
		msg, err := e.open(act, d)
		if err == nil {
			msg, err = e.deliver(ctx, spec, meta)
		}
		return msg, err
	})
	end := e.cfg.Clock()
	if p, ok := errors.AsType[*recovery.Panic](err); ok {
		p.Log(e.cfg.Logger, "attempt", "collection", d.Collection, "job", d.Job, "action", spec.Type)
	}
	if err != nil && msg == "" {
		msg = err.Error()
	}

	dec := Decision{ActionType: spec.Type, Err: err, Result: bus.Result{
		Collection: d.Collection, Job: d.Job, Scheduled: d.Scheduled, ExecutionTag: d.ExecutionTag,
		Occurrence: d.Occurrence, Incarnation: d.Incarnation, ActionName: name, Attempt: attempt, Delivery: a.Delivery,
		StartTime: start, EndTime: end,
		Status: job.ExecutionCompleted, Message: job.CutMessage(msg, MaxResultMessage),
	}}
	if err == nil {
		dec.Verdict = Ack
		dec.Result.Final = true
		dec.Result.MainDone = a.Phase == PhaseMain
		dec.Result.Faulted = a.Phase == PhaseError // the main action failed before this one ran
		return dec, nil
	}
	dec.Result.Status = job.ExecutionFailed
	switch {
	case attempt < retries && !action.IsPermanent(err):
		dec.Verdict = Retry
		dec.Delay = max(policy.Interval(), e.cfg.MinRetryInterval)
	case a.Phase == PhaseMain && act.ErrorAction != nil:
		dec.Verdict = Escalate
	default:
		dec.Verdict = Ack
		dec.Result.Final = true
		dec.Result.Faulted = true
	}
	dec.Result.MainDone = a.Phase == PhaseMain && dec.Verdict != Retry
	return dec, nil
}

// open opens the action's sealed secrets, in memory. It fails the attempt, without making it
// permanent, when it cannot: another worker may hold the key, or this one may be given it.
func (e *Executor) open(act *job.Action, d bus.Due) (string, error) {
	if err := e.cfg.Secrets.OpenAction(act, d.Collection, d.Job); err != nil {
		return "", fmt.Errorf("the job's secrets cannot be decrypted by this worker: %w (give workers the planners' keys: RESCHED_SECRET_KEYS_FILE)", err)
	}
	return "", nil
}

// deliver runs the deliverer under the attempt time-out.
func (e *Executor) deliver(ctx context.Context, spec *job.ActionSpec, m action.Meta) (string, error) {
	if e.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.cfg.Timeout)
		defer cancel()
	}
	return e.cfg.Deliverer.Deliver(ctx, spec, m)
}

// actionOf decodes the occurrence's action and picks the one of the attempt's phase.
func actionOf(a Attempt) (*job.Action, *job.ActionSpec, job.ActionName, error) {
	act := a.Action
	if act == nil {
		act = new(job.Action)
		if err := json.Unmarshal(a.Due.Action, act); err != nil {
			return act, nil, "", fmt.Errorf("%w: action: %v", ErrMalformed, err)
		}
	}
	switch a.Phase {
	case PhaseMain:
		return act, &act.ActionSpec, job.ActionNameMain, nil
	case PhaseError:
		if act.ErrorAction == nil {
			return act, nil, "", fmt.Errorf("%w: error phase of an action without errorAction", ErrMalformed)
		}
		return act, &act.ErrorAction.ActionSpec, job.ActionNameError, nil
	}
	return act, nil, "", fmt.Errorf("%w: unknown phase %d", ErrMalformed, a.Phase)
}
