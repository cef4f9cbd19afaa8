// Package actiontest is the conformance suite every action.Deliverer passes: the executor
// relies on the same behaviour from all of them (HTTP, Storage Queue, Service Bus), whatever
// the target. A deliverer's test builds a Harness over real (or faithfully faked) targets
// and calls Run:
//
//	func TestConformance(t *testing.T) {
//		target := startFakeQueue(t)
//		actiontest.Run(t, actiontest.Harness{
//			Deliverer: storagequeue.New(target.Endpoint),
//			Success: func(t *testing.T) (*job.ActionSpec, actiontest.Check) {
//				a := target.Action("ok")
//				return a, func(t *testing.T, m action.Meta) { target.MustHold(t, "ok", m.ExecutionTag) }
//			},
//			RetryableFailure: func(t *testing.T) *job.ActionSpec { return target.Action("answers-503") },
//			PermanentFailure: func(t *testing.T) *job.ActionSpec { return target.ActionWithBadCredentials() },
//			Hang:             func(t *testing.T) (*job.ActionSpec, <-chan struct{}) { return target.Action("never-answers"), nil },
//			Secrets:          []string{target.Key},
//		})
//	}
//
// The suite checks what the executor depends on: a success returns a message and no error; a
// failure returns an error, marked with action.Permanent exactly when retrying cannot help; a
// delivery never outlives its context (a deadline or a cancellation ends it promptly, with a
// retryable error); and no message or error ever holds a secret of the action.
package actiontest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/shared/job"
)

// Check verifies, after a successful Deliver, that the target received the delivery made
// with m (at least its ExecutionTag, and whatever else of m the action type carries to its
// target). It fails t when it did not. It may poll, with a deadline, when the target makes a
// delivery visible only after a while.
type Check func(t *testing.T, m action.Meta)

// Harness describes a deliverer under test and the targets it delivers to. Every func is
// called once per subtest with that subtest's t, so it can start a target and register its
// cleanup with t.Cleanup. All fields but Secrets and Timeout are required.
type Harness struct {
	// Deliverer is the deliverer under test, configured for the targets of the funcs below.
	Deliverer action.Deliverer

	// Success returns an action the target accepts, and the Check that the target got it.
	Success func(t *testing.T) (*job.ActionSpec, Check)

	// RetryableFailure returns an action the target refuses for a reason that may pass (an
	// HTTP 503, a throttled queue, a missing queue that may yet be created).
	RetryableFailure func(t *testing.T) *job.ActionSpec

	// PermanentFailure returns an action that can never be delivered whatever the target
	// does, e.g. credentials that cannot be read (an unreadable PFX, a malformed SAS token) or
	// a payload missing for its type.
	PermanentFailure func(t *testing.T) *job.ActionSpec

	// Hang returns an action whose target takes the delivery but never answers (until the
	// test ends). held, when not nil, is closed once the target holds the delivery; the suite
	// then also cancels a delivery in the middle, not only before it starts.
	Hang func(t *testing.T) (a *job.ActionSpec, held <-chan struct{})

	// Secrets are strings the actions carry (passwords, keys, SAS tokens) that must appear in
	// no message and no error.
	Secrets []string

	// Timeout is the deadline of the time-out subtest; default 300 ms.
	Timeout time.Duration
}

// promptly bounds how long a delivery may take to return once its context has ended.
const promptly = 10 * time.Second

// Run runs the conformance subtests against h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Deliverer == nil || h.Success == nil || h.RetryableFailure == nil || h.PermanentFailure == nil || h.Hang == nil {
		t.Fatal("actiontest: Harness needs Deliverer, Success, RetryableFailure, PermanentFailure and Hang")
	}
	if h.Timeout <= 0 {
		h.Timeout = 300 * time.Millisecond
	}
	t.Run("success", h.success)
	t.Run("retryable failure", h.retryableFailure)
	t.Run("permanent failure", h.permanentFailure)
	t.Run("time-out", h.timeout)
	t.Run("cancelled context", h.cancelledBefore)
	t.Run("cancelled mid-delivery", h.cancelledDuring)
}

func (h Harness) success(t *testing.T) {
	a, check := h.Success(t)
	m := NewMeta(t)
	msg, err := h.deliver(t, context.Background(), a, m)
	if err != nil {
		t.Fatalf("Deliver: %v (message %q), want success", err, msg)
	}
	if strings.TrimSpace(msg) == "" {
		t.Error("Deliver succeeded with an empty history message")
	}
	check(t, m)
}

func (h Harness) retryableFailure(t *testing.T) {
	msg, err := h.deliver(t, context.Background(), h.RetryableFailure(t), NewMeta(t))
	if err == nil {
		t.Fatalf("Deliver succeeded (message %q), want a retryable failure", msg)
	}
	if action.IsPermanent(err) {
		t.Errorf("Deliver: %v is marked permanent, want retryable", err)
	}
}

func (h Harness) permanentFailure(t *testing.T) {
	msg, err := h.deliver(t, context.Background(), h.PermanentFailure(t), NewMeta(t))
	if err == nil {
		t.Fatalf("Deliver succeeded (message %q), want a permanent failure", msg)
	}
	if !action.IsPermanent(err) {
		t.Errorf("Deliver: %v is not marked permanent", err)
	}
}

func (h Harness) timeout(t *testing.T) {
	a, _ := h.Hang(t)
	ctx, cancel := context.WithTimeout(context.Background(), h.Timeout)
	defer cancel()
	_, err := h.deliver(t, ctx, a, NewMeta(t))
	if err == nil {
		t.Fatal("Deliver to a target that never answers succeeded")
	}
	if action.IsPermanent(err) {
		t.Errorf("Deliver: a time-out (%v) is marked permanent, want retryable", err)
	}
}

func (h Harness) cancelledBefore(t *testing.T) {
	a, _ := h.Hang(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.deliver(t, ctx, a, NewMeta(t)); err == nil {
		t.Fatal("Deliver with a cancelled context succeeded")
	}
}

func (h Harness) cancelledDuring(t *testing.T) {
	a, held := h.Hang(t)
	if held == nil {
		t.Skip("the harness cannot tell when its target holds a delivery")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-held:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := h.deliver(t, ctx, a, NewMeta(t))
	if err == nil {
		t.Fatal("Deliver cancelled mid-delivery succeeded")
	}
	if action.IsPermanent(err) {
		t.Errorf("Deliver: a cancellation (%v) is marked permanent, want retryable", err)
	}
}

// deliver runs Deliver, failing the test if it outlives its context by more than promptly,
// and checks the result for secrets.
func (h Harness) deliver(t *testing.T, ctx context.Context, a *job.ActionSpec, m action.Meta) (string, error) {
	t.Helper()
	type outcome struct {
		msg string
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		msg, err := h.Deliverer.Deliver(ctx, a, m)
		done <- outcome{msg, err}
	}()
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		// The context has ended: the deliverer must follow soon. The timer only keeps a broken
		// deliverer from hanging the run; a healthy one returns in milliseconds.
		timer := time.NewTimer(promptly)
		defer timer.Stop()
		select {
		case o = <-done:
		case <-timer.C:
			t.Fatalf("Deliver still running %s after its context ended", promptly)
		}
	}
	for _, s := range h.Secrets {
		if s == "" {
			continue
		}
		if strings.Contains(o.msg, s) {
			t.Errorf("message %q holds a secret", o.msg)
		}
		if o.err != nil && strings.Contains(o.err.Error(), s) {
			t.Errorf("error %q holds a secret", o.err)
		}
	}
	return o.msg, o.err
}

// NewMeta returns the identity of a fresh attempt: a new execution tag and client request
// id, as the executor makes them.
func NewMeta(t *testing.T) action.Meta {
	t.Helper()
	return action.Meta{
		Collection:      "conformance",
		Job:             "job-" + randomHex(t, 4),
		Scheduled:       time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		ExecutionTag:    randomHex(t, 16),
		ClientRequestID: randomHex(t, 4) + "-0000-4000-8000-" + randomHex(t, 6),
		Occurrence:      1,
		Region:          "conformance",
	}
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
