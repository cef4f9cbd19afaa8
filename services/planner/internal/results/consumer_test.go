package results_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/dispatch"
	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/services/planner/internal/leasetest"
	"github.com/resched/resched/services/planner/internal/results"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/jobschema"
)

// t0 is the fixed "now" of the tests: every job fires at it.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const action = `"action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x"}`

type env struct {
	t      *testing.T
	nc     *nats.Conn
	js     jetstream.JetStream
	subj   bus.Subjects
	store  *store.Store
	svc    *jobs.Service
	events chan *nats.Msg
	m      *recorder
	logs   *testenv.LogBuffer // the consumer's log, at debug level
}

// setup starts NATS and Redis, a collection "c", and a running results consumer.
func setup(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.start(e.consumer())
	return e
}

// newEnv is setup without the results consumer.
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	nc, js, subj := natstest.Start(t).JetStream(t)
	v, err := jobschema.New()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, nc: nc, js: js, subj: subj, store: store.New(redistest.Start(t).Client(t), ""),
		events: make(chan *nats.Msg, 16), m: &recorder{}, logs: &testenv.LogBuffer{}}
	e.svc = jobs.New(jobs.Config{Store: e.store, Validator: v, Subjects: subj, Clock: func() time.Time { return t0 }})
	if _, _, err := e.svc.PutCollection(ctx, "c", []byte(`{"properties":{}}`), false); err != nil {
		t.Fatal(err)
	}
	sub, err := nc.ChanSubscribe(subj.Prefix+".events.>", e.events)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return e
}

// consumer is a results consumer as the planner runs it, logging at debug level to e.logs.
func (e *env) consumer() *results.Consumer {
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return results.New(results.Config{JS: e.js, Store: e.store, Events: e.nc, Subjects: e.subj,
		Clock: func() time.Time { return t0 }, Metrics: e.m, Logger: log})
}

// start runs a consumer until the end of the test, and checks that it stops cleanly.
func (e *env) start(rc *results.Consumer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rc.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
}

// fire puts a job and publishes its occurrence at t0, as a planner would.
func (e *env) fire(name, props string) {
	e.t.Helper()
	if _, _, err := e.svc.PutJob(context.Background(), "c", name, []byte(props), false); err != nil {
		e.t.Fatalf("put %s: %v", name, err)
	}
	d := dispatch.New(dispatch.Config{Store: e.store, JS: e.js, Events: e.nc, Leases: leasetest.HoldAll(e.t, e.store),
		Subjects: e.subj, Clock: func() time.Time { return t0 }})
	if n, err := d.DispatchOnce(context.Background()); err != nil || n != 1 {
		e.t.Fatalf("dispatch: published %d, %v", n, err)
	}
}

// attempt is one worker attempt at the occurrence of t0.
func attempt(j string, a job.ActionName, n int, st job.ExecutionStatus, final, faulted bool) bus.Result {
	start := t0.Add(time.Duration(n) * time.Minute)
	return bus.Result{Collection: "c", Job: j, Scheduled: t0, ExecutionTag: bus.ExecutionTag("c", j, 0, t0),
		Occurrence: 1, ActionName: a, Attempt: n, StartTime: start, EndTime: start.Add(time.Second),
		Status: st, Message: fmt.Sprintf("%s attempt %d", a, n), Final: final, Faulted: faulted,
		MainDone: a == job.ActionNameMain && (final || faulted || st == job.ExecutionCompleted)}
}

func (e *env) publish(rs ...bus.Result) {
	e.t.Helper()
	for _, r := range rs {
		b, err := json.Marshal(r)
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.js.Publish(context.Background(), e.subj.Result(r.Collection, r.Job), b, jetstream.WithMsgID(bus.ResultMsgID(r))); err != nil {
			e.t.Fatal(err)
		}
	}
}

// event waits for the next event on the bus.
func (e *env) event() bus.Event {
	e.t.Helper()
	select {
	case m := <-e.events:
		var ev bus.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			e.t.Fatal(err)
		}
		if want := e.subj.Event(ev.Collection, ev.Job, ev.Kind); m.Subject != want {
			e.t.Errorf("event on %s, want %s", m.Subject, want)
		}
		return ev
	case <-time.After(10 * time.Second):
		e.t.Fatal("no event within 10 s")
		return bus.Event{}
	}
}

// settled waits until the consumer has acknowledged or terminated everything published.
func (e *env) settled() {
	e.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Up to the stream's last message, which is exact once the publishes are acknowledged;
		// the consumer's count of pending messages lags on a busy server.
		st, err := e.js.Stream(ctx, e.subj.ResultsStream())
		c, cerr := e.js.Consumer(ctx, e.subj.ResultsStream(), bus.ResultsConsumer)
		if err == nil && cerr == nil {
			si, err := st.Info(ctx)
			info, cerr := c.Info(ctx)
			if err == nil && cerr == nil && si.State.LastSeq > 0 && info.AckFloor.Stream >= si.State.LastSeq {
				return
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatal("results not settled within 10 s")
		}
		time.Sleep(5 * time.Millisecond) // polling the consumer's state with a deadline
	}
}

func (e *env) get(name string) *job.Definition {
	e.t.Helper()
	d, err := e.svc.GetJob(context.Background(), "c", name)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *env) history(name string) []job.HistoryEntry {
	e.t.Helper()
	p, err := e.svc.History(context.Background(), "c", name, "", jobs.PageRequest{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Value
}

func TestLastOccurrenceSucceedsJobCompletes(t *testing.T) {
	e := setup(t)
	e.fire("once", `{"startTime":"2026-03-01T12:00:00Z",`+action+`}}`)
	if st := e.get("once").Properties.State; st != job.StateEnabled {
		t.Fatalf("before its result the job is %s, want Enabled", st)
	}
	r := attempt("once", job.ActionNameMain, 0, job.ExecutionCompleted, true, false)
	e.publish(r)

	ev := e.event()
	if ev.Kind != bus.EventCompleted || ev.Collection != "c" || ev.Job != "once" || !ev.Time.Equal(t0) {
		t.Errorf("event %+v, want completed of c/once at t0", ev)
	}
	d := e.get("once")
	if d.Properties.State != job.StateCompleted {
		t.Errorf("state %s, want Completed", d.Properties.State)
	}
	st := d.Properties.Status
	if st == nil || st.ExecutionCount != 1 || st.FailureCount != 0 || st.FaultedCount != 0 ||
		st.LastExecutionTime == nil || !st.LastExecutionTime.Equal(r.StartTime) || st.NextExecutionTime != nil {
		t.Errorf("status %+v", st)
	}
	h := e.history("once")
	if len(h) != 1 || h[0] != r.HistoryEntry() {
		t.Errorf("history %+v, want [%+v]", h, r.HistoryEntry())
	}
	if got := e.m.get("Completed"); got != 1 {
		t.Errorf("results metric Completed = %d, want 1", got)
	}
	for _, line := range []string{`msg="results: applied" collection=c job=once action=MainAction`, `msg="results: job ended" collection=c job=once state=Completed`} {
		if logs := e.logs.String(); !strings.Contains(logs, line) {
			t.Errorf("no debug line %s in the log at debug level:\n%s", line, logs)
		}
	}
}

// A planner that hung with a result in hand (a frozen host, a link that drops packets) holds
// that result's history back until the consumer's AckWait hands it to another planner: here
// the hung planner is a client of the same consumer that takes the result and never settles
// it. The wait was 30 s.
func TestAResultHeldByAPlannerThatHangsIsAppliedByAnother(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.fire("once", `{"startTime":"2026-03-01T12:00:00Z",`+action+`}}`)
	hung, err := e.js.CreateOrUpdateConsumer(ctx, e.subj.ResultsStream(), bus.ResultsConsumerConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := attempt("once", job.ActionNameMain, 0, job.ExecutionCompleted, true, false)
	e.publish(r)
	batch, err := hung.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := <-batch.Messages(); !ok {
		t.Fatalf("the hung planner took no result: %v", batch.Error())
	}
	taken := time.Now()
	e.start(e.consumer())
	testenv.Eventually(t, bus.ResultsAckWait+5*time.Second, "the result applied by the other planner", func() bool {
		return len(e.history("once")) == 1
	})
	t.Logf("applied %v after the hung planner took it", time.Since(taken).Round(time.Millisecond))
	if d := e.get("once"); d.Properties.State != job.StateCompleted {
		t.Errorf("state %s, want Completed", d.Properties.State)
	}
}

// A batch's apply must end, and its results be settled, before the consumer's AckWait hands
// them to another planner: the default handling time-out stays below it (it was 20 s against
// an AckWait of 30 s, and is 8 s against 10 s).
func TestAnApplyEndsBeforeTheAckWait(t *testing.T) {
	e := newEnv(t)
	e.fire("once", `{"startTime":"2026-03-01T12:00:00Z",`+action+`}}`)
	ds := &deadlineStore{Store: e.store, given: make(chan time.Duration, 4)}
	e.start(results.New(results.Config{JS: e.js, Store: ds, Events: e.nc, Subjects: e.subj,
		Clock: func() time.Time { return t0 }}))
	e.publish(attempt("once", job.ActionNameMain, 0, job.ExecutionCompleted, true, false))
	select {
	case given := <-ds.given:
		if given <= 0 || given > bus.ResultsAckWait-time.Second {
			t.Errorf("an apply was given %v, want under the AckWait (%v) less a second to settle", given.Round(time.Millisecond), bus.ResultsAckWait)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no apply")
	}
}

// deadlineStore reports how long each apply has before its deadline.
type deadlineStore struct {
	results.Store
	given chan time.Duration
}

func (d *deadlineStore) ApplyResults(ctx context.Context, rs []store.Result, now time.Time) []store.ResultApplied {
	dl, ok := ctx.Deadline()
	left := time.Duration(-1)
	if ok {
		left = time.Until(dl)
	}
	select {
	case d.given <- left:
	default:
	}
	return d.Store.ApplyResults(ctx, rs, now)
}

func TestLastOccurrenceFailsThroughRetriesJobFaults(t *testing.T) {
	e := setup(t)
	e.fire("once", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,
		"retryPolicy":{"retryType":"Fixed","retryInterval":"PT15S","retryCount":2}}}`)
	rs := []bus.Result{
		attempt("once", job.ActionNameMain, 0, job.ExecutionFailed, false, false),
		attempt("once", job.ActionNameMain, 1, job.ExecutionFailed, false, false),
		attempt("once", job.ActionNameMain, 2, job.ExecutionFailed, true, true),
	}
	e.publish(rs...)

	if ev := e.event(); ev.Kind != bus.EventFaulted || ev.Job != "once" {
		t.Errorf("event %+v, want faulted of c/once", ev)
	}
	d := e.get("once")
	if d.Properties.State != job.StateFaulted {
		t.Errorf("state %s, want Faulted", d.Properties.State)
	}
	st := d.Properties.Status
	if st == nil || st.ExecutionCount != 1 || st.FailureCount != 3 || st.FaultedCount != 1 ||
		st.LastExecutionTime == nil || !st.LastExecutionTime.Equal(rs[2].StartTime) {
		t.Errorf("status %+v, want 1 execution, 3 failures, 1 fault, last at the third attempt", st)
	}
	h := e.history("once")
	if len(h) != 3 {
		t.Fatalf("history has %d entries, want 3", len(h))
	}
	for i, want := range []bus.Result{rs[2], rs[1], rs[0]} { // newest first
		if h[i] != want.HistoryEntry() {
			t.Errorf("history[%d] = %+v, want %+v", i, h[i], want.HistoryEntry())
		}
	}
	if got := e.m.get("Failed"); got != 3 {
		t.Errorf("results metric Failed = %d, want 3", got)
	}
}

// A result of an occurrence that is not the last moves the counters and ends nothing.
func TestResultOfARecurringJobKeepsItEnabled(t *testing.T) {
	e := setup(t)
	e.fire("hourly", `{"startTime":"2026-03-01T12:00:00Z",`+action+`},"recurrence":{"frequency":"Hour"}}`)
	e.publish(attempt("hourly", job.ActionNameMain, 0, job.ExecutionFailed, true, true))
	e.settled()
	d := e.get("hourly")
	st := d.Properties.Status
	if d.Properties.State != job.StateEnabled || st.ExecutionCount != 1 || st.FailureCount != 1 || st.FaultedCount != 1 ||
		st.NextExecutionTime == nil || !st.NextExecutionTime.Equal(t0.Add(time.Hour)) {
		t.Errorf("state %s, status %+v", d.Properties.State, st)
	}
	select {
	case m := <-e.events:
		t.Errorf("unexpected event on %s", m.Subject)
	default:
	}
}

// Malformed results are terminated, and the results after them are still applied.
func TestMalformedResultsAreDropped(t *testing.T) {
	e := setup(t)
	e.fire("once", `{"startTime":"2026-03-01T12:00:00Z",`+action+`}}`)
	ctx := context.Background()
	other := attempt("other", job.ActionNameMain, 0, job.ExecutionCompleted, true, false)
	otherBody, _ := json.Marshal(other)
	bad := map[string][]byte{
		"not json":          []byte(`{"collection":`),
		"unknown status":    []byte(`{"collection":"c","job":"once","scheduledTime":"2026-03-01T12:00:00Z","actionName":"MainAction","status":"Great"}`),
		"no action name":    []byte(`{"collection":"c","job":"once","scheduledTime":"2026-03-01T12:00:00Z","status":"Completed"}`),
		"another job":       otherBody, // published on once's subject
		"no scheduled time": []byte(`{"collection":"c","job":"once","actionName":"MainAction","status":"Completed","final":true}`),
	}
	for name, body := range bad {
		if _, err := e.js.Publish(ctx, e.subj.Result("c", "once"), body); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	e.publish(attempt("once", job.ActionNameMain, 0, job.ExecutionCompleted, true, false))
	if ev := e.event(); ev.Kind != bus.EventCompleted {
		t.Errorf("event %+v, want completed", ev)
	}
	e.settled()
	if h := e.history("once"); len(h) != 1 {
		t.Errorf("history %+v: malformed results were recorded", h)
	}
	if got := e.m.errors("result_decode"); got != len(bad) {
		t.Errorf("decode errors %d, want %d", got, len(bad))
	}
}

// A worker's batch (several results of one collection in one message) is applied result by
// result: a malformed one is dropped alone, and the same batch delivered again changes
// nothing (result ids are remembered).
func TestBatchOfResultsIsAppliedOnce(t *testing.T) {
	e := setup(t)
	e.fire("a", `{"startTime":"2026-03-01T12:00:00Z",`+action+`}}`)
	e.fire("b", `{"startTime":"2026-03-01T12:00:00Z",`+action+`}}`)
	a := attempt("a", job.ActionNameMain, 0, job.ExecutionCompleted, true, false)
	b := attempt("b", job.ActionNameMain, 0, job.ExecutionFailed, true, true)
	stray := a
	stray.Collection = "d" // not the collection of the subject
	body := bus.AppendResultsJSON(nil, []bus.Result{a, stray, b})
	for range 2 {
		if _, err := e.js.Publish(context.Background(), e.subj.Results("c"), body); err != nil {
			t.Fatal(err)
		}
	}
	kinds := map[string]string{}
	for range 2 {
		ev := e.event()
		kinds[ev.Job] = ev.Kind
	}
	if kinds["a"] != bus.EventCompleted || kinds["b"] != bus.EventFaulted {
		t.Errorf("events %v, want a completed and b faulted", kinds)
	}
	e.settled()
	for _, j := range []string{"a", "b"} {
		if h := e.history(j); len(h) != 1 {
			t.Errorf("history of %s: %+v, want one entry", j, h)
		}
	}
	if st := e.get("b").Properties.Status; st == nil || st.ExecutionCount != 1 || st.FaultedCount != 1 {
		t.Errorf("status of b %+v, want one execution, faulted", st)
	}
	if got := e.m.errors("result_decode"); got != 2 {
		t.Errorf("decode errors %d, want 2 (the stray result, in each delivery)", got)
	}

	// A batch of which nothing can be applied is terminated, not delivered again.
	if _, err := e.js.Publish(context.Background(), e.subj.Results("c"), bus.AppendResultsJSON(nil, []bus.Result{stray})); err != nil {
		t.Fatal(err)
	}
	e.settled()
	if got := e.m.errors("result_decode"); got != 4 {
		t.Errorf("decode errors %d, want 4 (the stray result, then the message)", got)
	}
}

// A result for a job deleted meanwhile is acknowledged and changes nothing.
func TestResultOfADeletedJobIsAcknowledged(t *testing.T) {
	e := setup(t)
	e.fire("gone", `{"startTime":"2026-03-01T12:00:00Z",`+action+`}}`)
	if err := e.svc.DeleteJob(context.Background(), "c", "gone"); err != nil {
		t.Fatal(err)
	}
	e.publish(attempt("gone", job.ActionNameMain, 0, job.ExecutionCompleted, true, false))
	e.settled()
	if _, err := e.store.GetJob(context.Background(), "c", "gone"); err == nil {
		t.Error("the result brought a deleted job back")
	}
}

// recorder is a results.Metrics that counts.
type recorder struct {
	mu      sync.Mutex
	results map[string]int
	errs    map[string]int
}

func (r *recorder) Result(status string) { r.add(&r.results, status) }
func (r *recorder) Error(stage string)   { r.add(&r.errs, stage) }

func (r *recorder) add(m *map[string]int, k string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[k]++
}

func (r *recorder) get(status string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.results[status]
}

func (r *recorder) errors(stage string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs[stage]
}

// A delivery that left no result (its worker killed during the second attempt) shows in the
// history, between the attempts before and after it, as the Failed attempt it stood for; the
// counters move only for the attempts reported. The lost attempt's result, coming late (its
// worker cut off rather than killed), adds nothing.
func TestADeliveryLeftWithoutAResultShowsInTheHistory(t *testing.T) {
	e := setup(t)
	e.fire("once", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,
		"retryPolicy":{"retryType":"Fixed","retryInterval":"PT15S","retryCount":3}}}`)
	first := attempt("once", job.ActionNameMain, 0, job.ExecutionFailed, false, false)
	first.Delivery = 1
	third := attempt("once", job.ActionNameMain, 2, job.ExecutionCompleted, true, false)
	third.Delivery = 3
	late := attempt("once", job.ActionNameMain, 1, job.ExecutionFailed, false, false)
	late.Delivery = 2
	e.publish(first, third, late)
	if ev := e.event(); ev.Kind != bus.EventCompleted {
		t.Errorf("event %+v, want completed", ev)
	}
	e.settled()
	h := e.history("once")
	if len(h) != 3 {
		t.Fatalf("history has %d entries, want 3: %+v", len(h), h)
	}
	lost := job.HistoryEntry{StartTime: third.StartTime, EndTime: third.StartTime, ExpectedExecutionTime: t0, ActionName: job.ActionNameMain,
		Status: job.ExecutionFailed, Message: store.LostMessage(2, 3), RetryCount: 1, RepeatCount: 1}
	for i, want := range []job.HistoryEntry{third.HistoryEntry(), lost, first.HistoryEntry()} { // newest first
		if h[i] != want {
			t.Errorf("history[%d] = %+v\nwant %+v", i, h[i], want)
		}
	}
	if st := e.get("once").Properties.Status; st == nil || st.ExecutionCount != 1 || st.FailureCount != 1 {
		t.Errorf("status %+v, want 1 execution and 1 failure (the reported one)", st)
	}
	if got := e.m.get("Lost"); got != 1 {
		t.Errorf("results metric Lost = %d, want 1", got)
	}

	// Without retries every delivery runs attempt 0: the third's result is the first recorded,
	// so the two before it left none. Each entry counts the deliveries before it.
	e.fire("none", `{"startTime":"2026-03-01T12:00:00Z",`+action+`, "retryPolicy":{"retryType":"None"}}}`)
	again := attempt("none", job.ActionNameMain, 0, job.ExecutionCompleted, true, false)
	again.Delivery = 3
	e.publish(again)
	e.event()
	e.settled()
	var got []string
	for _, h := range e.history("none") {
		got = append(got, fmt.Sprint(h.RetryCount, h.Status, h.Message))
	}
	if want := []string{"2Completed" + again.Message, "1Failed" + store.LostMessage(2, 3), "0Failed" + store.LostMessage(1, 3)}; !slices.Equal(got, want) {
		t.Errorf("history without retries\n got %q\nwant %q", got, want)
	}
	if got := e.m.get("Lost"); got != 3 {
		t.Errorf("results metric Lost = %d, want 3", got)
	}
}
