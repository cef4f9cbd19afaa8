package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/services/worker/internal/executor"
	"github.com/resched/resched/shared/job"
)

// fakeDeliverer answers every attempt the same way and records what it was asked.
type fakeDeliverer struct {
	msg   string
	err   error
	specs []*job.ActionSpec
	metas []action.Meta
}

func (f *fakeDeliverer) Deliver(_ context.Context, a *job.ActionSpec, m action.Meta) (string, error) {
	f.specs = append(f.specs, a)
	f.metas = append(f.metas, m)
	return f.msg, f.err
}

var (
	scheduled = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	start     = time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC)
	errTarget = errors.New("host answered 503")
)

func policy(kind job.RetryType, count int, interval time.Duration) *job.RetryPolicy {
	d := job.DurationOf(interval)
	return &job.RetryPolicy{RetryType: kind, RetryCount: &count, RetryInterval: &d}
}

// due builds a due occurrence of an Http main action with the given policy and, when
// errPolicy is not nil or withError is set, a StorageQueue error action.
func due(t *testing.T, main *job.RetryPolicy, withError bool, errPolicy *job.RetryPolicy) bus.Due {
	t.Helper()
	act := job.Action{ActionSpec: job.ActionSpec{Type: job.ActionHTTP, Request: &job.HTTPRequest{URI: "http://t/", Method: "GET"}, RetryPolicy: main}}
	if withError {
		act.ErrorAction = &job.ErrorAction{ActionSpec: job.ActionSpec{Type: job.ActionStorageQueue,
			QueueMessage: &job.StorageQueueMessage{StorageAccount: "acct", QueueName: "q", Message: "m"}, RetryPolicy: errPolicy}}
	}
	raw, err := json.Marshal(act)
	if err != nil {
		t.Fatal(err)
	}
	return bus.Due{Collection: "c", Job: "j", Scheduled: scheduled, ExecutionTag: bus.ExecutionTag("c", "j", 31, scheduled), Occurrence: 7, Incarnation: 31, Action: raw}
}

// want is what a test expects of a Decision.
type want struct {
	verdict executor.Verdict
	delay   time.Duration
	name    job.ActionName
	typ     job.ActionType
	attempt int
	status  job.ExecutionStatus
	final   bool
	faulted bool
}

func TestExecute(t *testing.T) {
	const (
		errPh  = executor.PhaseError
		ok     = job.ExecutionCompleted
		failed = job.ExecutionFailed
	)
	var (
		none   = policy(job.RetryNone, 0, 0)
		fixed2 = policy(job.RetryFixed, 2, time.Minute)
	)
	tests := []struct {
		name      string
		policy    *job.RetryPolicy
		withError bool
		errPolicy *job.RetryPolicy
		phase     executor.Phase
		delivery  int
		err       error
		want      want
	}{
		{name: "first attempt succeeds", delivery: 1,
			want: want{verdict: executor.Ack, name: job.ActionNameMain, typ: job.ActionHTTP, status: ok, final: true}},
		{name: "a retry succeeds", delivery: 3,
			want: want{verdict: executor.Ack, name: job.ActionNameMain, typ: job.ActionHTTP, attempt: 2, status: ok, final: true}},
		{name: "default policy: 4 retries 30 s apart", delivery: 1, err: errTarget,
			want: want{verdict: executor.Retry, delay: 30 * time.Second, name: job.ActionNameMain, typ: job.ActionHTTP, status: failed}},
		{name: "default policy: the fourth retry is not the last", delivery: 4, err: errTarget,
			want: want{verdict: executor.Retry, delay: 30 * time.Second, name: job.ActionNameMain, typ: job.ActionHTTP, attempt: 3, status: failed}},
		{name: "default policy: the last retry fails, no error action", delivery: 5, err: errTarget,
			want: want{verdict: executor.Ack, name: job.ActionNameMain, typ: job.ActionHTTP, attempt: 4, status: failed, final: true, faulted: true}},
		{name: "the last retry fails: hand over to the error action", delivery: 5, withError: true, err: errTarget,
			want: want{verdict: executor.Escalate, name: job.ActionNameMain, typ: job.ActionHTTP, attempt: 4, status: failed}},
		{name: "a delivery past the plan repeats the last attempt", delivery: 9, err: errTarget,
			want: want{verdict: executor.Ack, name: job.ActionNameMain, typ: job.ActionHTTP, attempt: 4, status: failed, final: true, faulted: true}},
		{name: "None: no retry", policy: none, delivery: 1, err: errTarget,
			want: want{verdict: executor.Ack, name: job.ActionNameMain, typ: job.ActionHTTP, status: failed, final: true, faulted: true}},
		{name: "None then the error action", policy: none, withError: true, delivery: 1, err: errTarget,
			want: want{verdict: executor.Escalate, name: job.ActionNameMain, typ: job.ActionHTTP, status: failed}},
		{name: "Fixed: its interval", policy: fixed2, delivery: 2, err: errTarget,
			want: want{verdict: executor.Retry, delay: time.Minute, name: job.ActionNameMain, typ: job.ActionHTTP, attempt: 1, status: failed}},
		{name: "Fixed: its count", policy: fixed2, delivery: 3, err: errTarget,
			want: want{verdict: executor.Ack, name: job.ActionNameMain, typ: job.ActionHTTP, attempt: 2, status: failed, final: true, faulted: true}},
		{name: "Fixed: the minimum interval is a floor", policy: policy(job.RetryFixed, 3, time.Second), delivery: 1, err: errTarget,
			want: want{verdict: executor.Retry, delay: 15 * time.Second, name: job.ActionNameMain, typ: job.ActionHTTP, status: failed}},
		{name: "permanent failure skips the retries", delivery: 1, err: action.Permanent(errTarget),
			want: want{verdict: executor.Ack, name: job.ActionNameMain, typ: job.ActionHTTP, status: failed, final: true, faulted: true}},
		{name: "permanent failure goes to the error action", withError: true, delivery: 2, err: action.Permanent(errTarget),
			want: want{verdict: executor.Escalate, name: job.ActionNameMain, typ: job.ActionHTTP, attempt: 1, status: failed}},
		{name: "error action succeeds: the occurrence faulted all the same", withError: true, phase: errPh, delivery: 1,
			want: want{verdict: executor.Ack, name: job.ActionNameError, typ: job.ActionStorageQueue, status: ok, final: true, faulted: true}},
		{name: "error action retries with its own policy", withError: true, errPolicy: policy(job.RetryFixed, 1, 20*time.Second), phase: errPh, delivery: 1, err: errTarget,
			want: want{verdict: executor.Retry, delay: 20 * time.Second, name: job.ActionNameError, typ: job.ActionStorageQueue, status: failed}},
		{name: "error action gives up", withError: true, errPolicy: policy(job.RetryFixed, 1, 20*time.Second), phase: errPh, delivery: 2, err: errTarget,
			want: want{verdict: executor.Ack, name: job.ActionNameError, typ: job.ActionStorageQueue, attempt: 1, status: failed, final: true, faulted: true}},
		{name: "error action: permanent failure", withError: true, phase: errPh, delivery: 1, err: action.Permanent(errTarget),
			want: want{verdict: executor.Ack, name: job.ActionNameError, typ: job.ActionStorageQueue, status: failed, final: true, faulted: true}},
		{name: "main action with a policy, error action with the defaults", policy: none, withError: true, phase: errPh, delivery: 2, err: errTarget,
			want: want{verdict: executor.Retry, delay: 30 * time.Second, name: job.ActionNameError, typ: job.ActionStorageQueue, attempt: 1, status: failed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDeliverer{msg: "target said so", err: tt.err}
			clock := start
			e := executor.New(executor.Config{Deliverer: f, Region: "local", Clock: func() time.Time {
				clock = clock.Add(time.Second)
				return clock
			}})
			d := due(t, tt.policy, tt.withError, tt.errPolicy)
			dec, err := e.Execute(context.Background(), executor.Attempt{Due: d, Phase: tt.phase, Delivery: tt.delivery})
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			r := dec.Result
			got := want{verdict: dec.Verdict, delay: dec.Delay, name: r.ActionName, typ: dec.ActionType, attempt: r.Attempt,
				status: r.Status, final: r.Final, faulted: r.Faulted}
			if got != tt.want {
				t.Errorf("decision\n got %+v\nwant %+v", got, tt.want)
			}
			if !errors.Is(dec.Err, tt.err) {
				t.Errorf("Decision.Err = %v, want %v", dec.Err, tt.err)
			}
			if len(f.specs) != 1 || f.specs[0].Type != tt.want.typ {
				t.Fatalf("deliverer ran %d times (%v), want once for %s", len(f.specs), f.specs, tt.want.typ)
			}
			m := f.metas[0]
			if m.Collection != "c" || m.Job != "j" || !m.Scheduled.Equal(scheduled) || m.ExecutionTag != d.ExecutionTag ||
				m.Occurrence != 7 || m.Attempt != tt.want.attempt || m.Region != "local" || m.ClientRequestID == "" {
				t.Errorf("meta %+v", m)
			}
			if r.Collection != "c" || r.Job != "j" || !r.Scheduled.Equal(scheduled) || r.ExecutionTag != d.ExecutionTag || r.Occurrence != 7 || r.Incarnation != 31 ||
				r.Delivery != tt.delivery {
				t.Errorf("result does not name the occurrence: %+v", r)
			}
			if !r.StartTime.Equal(start.Add(time.Second)) || !r.EndTime.Equal(start.Add(2*time.Second)) {
				t.Errorf("result times %s to %s", r.StartTime, r.EndTime)
			}
			if r.Message != "target said so" {
				t.Errorf("message %q", r.Message)
			}
		})
	}
}

func TestExecuteFailureWithoutMessage(t *testing.T) {
	f := &fakeDeliverer{err: errTarget}
	dec, err := executor.New(executor.Config{Deliverer: f}).Execute(context.Background(), executor.Attempt{Due: due(t, nil, false, nil), Delivery: 1})
	if err != nil {
		t.Fatal(err)
	}
	if dec.Result.Message != errTarget.Error() {
		t.Errorf("message %q, want the error %q", dec.Result.Message, errTarget)
	}
}

func TestExecuteMalformed(t *testing.T) {
	tests := []struct {
		name  string
		due   bus.Due
		phase executor.Phase
	}{
		{"action not JSON", bus.Due{Action: json.RawMessage(`{"type":`)}, executor.PhaseMain},
		{"action of the wrong shape", bus.Due{Action: json.RawMessage(`{"type":"Teleport"}`)}, executor.PhaseMain},
		{"error phase without errorAction", due(t, nil, false, nil), executor.PhaseError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDeliverer{}
			_, err := executor.New(executor.Config{Deliverer: f}).Execute(context.Background(), executor.Attempt{Due: tt.due, Phase: tt.phase, Delivery: 1})
			if !errors.Is(err, executor.ErrMalformed) {
				t.Errorf("Execute: %v, want ErrMalformed", err)
			}
			if len(f.specs) != 0 {
				t.Error("a malformed occurrence was delivered")
			}
		})
	}
}

// deadlineDeliverer reports whether its context had a deadline.
type deadlineDeliverer struct{ hasDeadline bool }

func (d *deadlineDeliverer) Deliver(ctx context.Context, _ *job.ActionSpec, _ action.Meta) (string, error) {
	_, d.hasDeadline = ctx.Deadline()
	return "", nil
}

func TestExecuteTimeoutBoundsTheAttempt(t *testing.T) {
	for _, timeout := range []time.Duration{0, time.Minute} {
		d := &deadlineDeliverer{}
		_, err := executor.New(executor.Config{Deliverer: d, Timeout: timeout}).Execute(context.Background(), executor.Attempt{Due: due(t, nil, false, nil), Delivery: 1})
		if err != nil {
			t.Fatal(err)
		}
		if d.hasDeadline != (timeout > 0) {
			t.Errorf("Timeout %s: attempt context has a deadline: %v", timeout, d.hasDeadline)
		}
	}
}

func TestNewRequestID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		id := executor.NewRequestID()
		if !re.MatchString(id) {
			t.Fatalf("%q is not a version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("%q twice", id)
		}
		seen[id] = true
	}
}

// panickingDeliverer stands for a deliverer with a bug that one job's action trips.
type panickingDeliverer struct{ calls int }

func (p *panickingDeliverer) Deliver(context.Context, *job.ActionSpec, action.Meta) (string, error) {
	p.calls++
	var a *job.HTTPRequest
	return a.URI, nil // a nil dereference
}

// TestAPanicFailsTheAttemptAlone: a deliverer that panics fails that attempt as a target's
// failure would, retried by the policy and then handed to the error action, and the panic
// stops nothing (it would have stopped the worker, and then each worker taking the
// occurrence again).
func TestAPanicFailsTheAttemptAlone(t *testing.T) {
	var logged bytes.Buffer
	p := &panickingDeliverer{}
	ex := executor.New(executor.Config{Deliverer: p, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	d := due(t, policy(job.RetryFixed, 1, time.Minute), true, nil)
	dec, err := ex.Execute(context.Background(), executor.Attempt{Due: d, Delivery: 1})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if dec.Verdict != executor.Retry || dec.Delay != time.Minute || dec.Result.Status != job.ExecutionFailed || dec.Result.Final {
		t.Errorf("first attempt: %+v, want a retry in 1m of a failed attempt", dec)
	}
	if !strings.Contains(dec.Result.Message, "internal error") {
		t.Errorf("message %q: want it to say an internal error stopped the attempt", dec.Result.Message)
	}
	if !strings.Contains(logged.String(), "panic recovered: attempt") || !strings.Contains(logged.String(), "job=j") {
		t.Errorf("the panic is not logged with its job:\n%s", logged.String())
	}
	dec, err = ex.Execute(context.Background(), executor.Attempt{Due: d, Delivery: 2})
	if err != nil || dec.Verdict != executor.Escalate {
		t.Errorf("last attempt: %v, %v; want the error action", dec.Verdict, err)
	}
	if p.calls != 2 {
		t.Errorf("deliverer called %d times, want 2", p.calls)
	}
}
