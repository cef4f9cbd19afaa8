package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/worker/internal/action"
	"github.com/resched/resched/services/worker/internal/action/httpaction"
	"github.com/resched/resched/services/worker/internal/consumer"
	"github.com/resched/resched/services/worker/internal/executor"
	"github.com/resched/resched/shared/job"
)

// deadline bounds every wait of these tests; they poll, they never sleep.
const deadline = 20 * time.Second

var scheduled = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// env is a NATS server with the streams, as a planner would have left it.
type env struct {
	srv      *natstest.Server
	js       jetstream.JetStream
	subjects bus.Subjects
	last     *consumer.Consumer // the worker started last
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := natstest.Start(t)
	js, err := jetstream.New(srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv, js: js, subjects: bus.NewSubjects("")}
	if _, err := bus.EnsureStreams(context.Background(), js, e.subjects, bus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	return e
}

// loggedWorker is worker with its log kept in logs, for tests that read what it said.
func (e *env) loggedWorker(t *testing.T, logs *testenv.LogBuffer, edit func(*consumer.Config)) (stop func() error) {
	t.Helper()
	return e.worker(t, func(c *consumer.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		if edit != nil {
			edit(c)
		}
	})
}

// worker starts a consumer on a connection of its own, as a worker process would have, and
// returns the func that stops it (also called at the end of the test).
func (e *env) worker(t *testing.T, edit func(*consumer.Config)) (stop func() error) {
	t.Helper()
	nc, err := nats.Connect(e.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := consumer.Config{
		JS: js, Subjects: e.subjects, Concurrency: 4, AckWait: 30 * time.Second, StopTimeout: 10 * time.Second,
		RetryDelay: 50 * time.Millisecond,
		Executor: executor.New(executor.Config{
			Deliverer:        action.Registry{job.ActionHTTP: httpaction.New(httpaction.Options{Timeout: 10 * time.Second})},
			MinRetryInterval: time.Millisecond,
		}),
	}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := consumer.New(cfg)
	e.last = c
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
			nc.Close()
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// publishDue publishes an occurrence as the planner does.
func (e *env) publishDue(t *testing.T, collection, jobName string, at time.Time, act job.Action) string {
	t.Helper()
	return e.publishDueAs(t, collection, jobName, at, 1, bus.MsgID(collection, jobName, 0, at), act)
}

// publishDueAs publishes an occurrence numbered occurrence with the message id id (a run-now's
// has its own; none when ""), as the planner does, and returns its execution tag.
func (e *env) publishDueAs(t *testing.T, collection, jobName string, at time.Time, occurrence int, id string, act job.Action) string {
	t.Helper()
	raw, err := json.Marshal(act)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(e.subjects.Due(collection, jobName))
	m.Data = bus.AppendDueTagged(nil, collection, jobName, 0, at, bus.TagOf(id), occurrence, raw)
	if id != "" { // "": as a client that sets none
		m.Header.Set(bus.HeaderMsgID, id)
	}
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return bus.TagOf(id)
}

// results reads the results stream as the planner does.
type results struct {
	cons     jetstream.Consumer
	subjects bus.Subjects
	messages int // how many messages the results taken came in
}

func (e *env) results(t *testing.T) *results {
	t.Helper()
	cons, err := e.js.CreateOrUpdateConsumer(context.Background(), e.subjects.ResultsStream(), jetstream.ConsumerConfig{
		Durable: "test-results", AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &results{cons: cons, subjects: e.subjects}
}

// take returns the next n results, failing the test if they do not come.
func (r *results) take(t *testing.T, n int) []bus.Result {
	t.Helper()
	var out []bus.Result
	end := time.Now().Add(deadline)
	for len(out) < n {
		if time.Now().After(end) {
			t.Fatalf("got %d results, want %d: %+v", len(out), n, out)
		}
		batch, err := r.cons.Fetch(n-len(out), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			out = append(out, r.read(t, m)...)
			r.messages++
			_ = m.Ack()
		}
	}
	return out
}

// read checks a results message: one result on its job's subject, or an array of one
// collection's results on the collection's subject, each with the message id that stands for
// what it holds.
func (r *results) read(t *testing.T, m jetstream.Msg) []bus.Result {
	t.Helper()
	var one bus.Result
	if err := json.Unmarshal(m.Data(), &one); err == nil {
		if want := r.subjects.Result(one.Collection, one.Job); m.Subject() != want {
			t.Errorf("result on %s, want %s", m.Subject(), want)
		}
		if want := bus.ResultMsgID(one); m.Headers().Get(bus.HeaderMsgID) != want {
			t.Errorf("result id %q, want %q", m.Headers().Get(bus.HeaderMsgID), want)
		}
		return []bus.Result{one}
	}
	var many []bus.Result
	if err := json.Unmarshal(m.Data(), &many); err != nil || len(many) < 2 {
		t.Fatalf("results message %s: neither a result nor several (%v)", m.Data(), err)
	}
	for _, res := range many {
		if want := r.subjects.Results(res.Collection); m.Subject() != want {
			t.Errorf("results on %s, one of them of collection %s", m.Subject(), res.Collection)
		}
	}
	if want := bus.ResultsMsgID(many); m.Headers().Get(bus.HeaderMsgID) != want {
		t.Errorf("results id %q, want %q", m.Headers().Get(bus.HeaderMsgID), want)
	}
	return many
}

// dueMessages is how many messages the due stream holds (acknowledged ones are gone).
func (e *env) dueMessages(t *testing.T) uint64 {
	t.Helper()
	s, err := e.js.Stream(context.Background(), e.subjects.DueStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// target is an HTTP target answering each request with the next status of a script (the
// last one repeating), recording the execution tag and request id of each.
type target struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	calls    []call
	block    chan struct{} // when not nil, requests wait on it (or on their cancellation)
	arrived  chan struct{} // receives once per request, when not nil
	answer   http.Header   // headers every answer carries
}

type call struct{ tag, requestID string }

func newTarget(t *testing.T, statuses ...int) *target {
	t.Helper()
	tg := &target{statuses: statuses}
	tg.Server = httptest.NewServer(http.HandlerFunc(tg.serve))
	t.Cleanup(tg.Close)
	return tg
}

func (tg *target) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	tg.mu.Lock()
	tg.calls = append(tg.calls, call{r.Header.Get(httpaction.HeaderExecutionTag), r.Header.Get(httpaction.HeaderClientRequestID)})
	status := http.StatusOK
	if n := len(tg.calls); len(tg.statuses) > 0 {
		status = tg.statuses[min(n, len(tg.statuses))-1]
	}
	block, arrived := tg.block, tg.arrived
	for name, values := range tg.answer {
		w.Header()[name] = values
	}
	tg.mu.Unlock()
	if arrived != nil {
		arrived <- struct{}{}
	}
	if block != nil {
		select {
		case <-block:
		case <-r.Context().Done():
			return
		}
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, "status %d", status)
}

func (tg *target) callsSoFar() []call {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]call(nil), tg.calls...)
}

func httpAct(uri string, p *job.RetryPolicy) job.ActionSpec {
	return job.ActionSpec{Type: job.ActionHTTP, Request: &job.HTTPRequest{URI: uri, Method: "POST"}, RetryPolicy: p}
}

func fixed(count int, interval time.Duration) *job.RetryPolicy {
	d := job.DurationOf(interval)
	return &job.RetryPolicy{RetryType: job.RetryFixed, RetryCount: &count, RetryInterval: &d}
}

// heldPubAcks is JetStream whose asynchronous publishes are stored at once but acknowledged to
// the caller only once gate is closed.
type heldPubAcks struct {
	jetstream.JetStream
	gate chan struct{}
}

func (h heldPubAcks) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f, err := h.JetStream.PublishMsgAsync(m, opts...)
	if err != nil {
		return nil, err
	}
	held := &heldPubAck{PubAckFuture: f, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	go func() {
		<-h.gate
		select {
		case a := <-f.Ok():
			held.ok <- a
		case err := <-f.Err():
			held.err <- err
		}
	}()
	return held, nil
}

type heldPubAck struct {
	jetstream.PubAckFuture
	ok  chan *jetstream.PubAck
	err chan error
}

func (a *heldPubAck) Ok() <-chan *jetstream.PubAck { return a.ok }
func (a *heldPubAck) Err() <-chan error            { return a.err }

// eachOnce checks that the results hold one result for each of tags.
func eachOnce(t *testing.T, rs []bus.Result, tags map[string]bool) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range rs {
		seen[r.ExecutionTag]++
	}
	for tag := range tags {
		if seen[tag] != 1 {
			t.Errorf("result of %s stored %d times, want once", tag, seen[tag])
		}
	}
}

// retryWaits lists the retry_in of the JSON log lines whose message starts with msg, in order.
func retryWaits(logs, msg string) []string {
	var waits []string
	for line := range strings.Lines(logs) {
		var rec struct {
			Msg     string `json:"msg"`
			RetryIn string `json:"retry_in"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, msg) {
			waits = append(waits, rec.RetryIn)
		}
	}
	return waits
}

// loggedWaits waits until logs hold n records whose message starts with msg, and returns the
// retry_in of the first n.
func loggedWaits(t *testing.T, logs *testenv.LogBuffer, msg string, n int) []string {
	t.Helper()
	var waits []string
	testenv.Eventually(t, deadline, fmt.Sprintf("%d log records %q", n, msg), func() bool {
		waits = retryWaits(logs.String(), msg)
		return len(waits) >= n
	}, logs.String)
	return waits[:n]
}

// unansweredGets is JetStream whose streams answer no message lookup (a stream leader lost,
// a server cut off), everything else as usual.
type unansweredGets struct{ jetstream.JetStream }

func (u unansweredGets) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	st, err := u.JetStream.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return unansweredGet{st}, nil
}

type unansweredGet struct{ jetstream.Stream }

func (unansweredGet) GetMsg(context.Context, uint64, ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	return nil, context.DeadlineExceeded
}
