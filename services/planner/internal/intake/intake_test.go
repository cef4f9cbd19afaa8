package intake_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/resched/resched/services/planner/internal/intake"
	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/jobschema"
)

var t0 = time.Date(2024, 1, 1, 11, 0, 0, 0, time.UTC)

const definition = `{"startTime": "2024-01-02T00:00:00Z",
  "action": {"type": "Http", "request": {"uri": "http://localhost/hook", "method": "POST"}},
  "recurrence": {"frequency": "Hour"}}`

var subjects = bus.NewSubjects("")

// env is a planner's intake on real NATS and Redis, with a client connection.
type env struct {
	srv   *natstest.Server
	redis *redistest.Server
	nc    *nats.Conn // the client's connection
	js    jetstream.JetStream
	svc   *jobs.Service
}

func newEnv(t testing.TB) *env {
	t.Helper()
	srv := natstest.Start(t)
	e := &env{srv: srv, nc: srv.Connect(t)}
	conn := srv.Connect(t)
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	e.js = js
	if _, err := bus.EnsureStreams(context.Background(), js, subjects, bus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	v, err := jobschema.New()
	if err != nil {
		t.Fatal(err)
	}
	e.redis = redistest.Start(t)
	e.svc = jobs.New(jobs.Config{Store: store.New(e.redis.Client(t), "test"), Validator: v,
		Events: conn, Subjects: subjects, Clock: func() time.Time { return t0 }})
	if _, _, err := e.svc.PutCollection(context.Background(), "c", []byte(`{}`), false); err != nil {
		t.Fatal(err)
	}
	return e
}

// run starts an intake with the given service until the end of the test, and checks that it
// then stops cleanly.
func (e *env) run(t *testing.T, svc intake.Jobs, opts ...func(*intake.Config)) {
	t.Helper()
	cfg := intake.Config{JS: e.js, Jobs: svc, Subjects: subjects, Events: e.nc,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), RetryDelay: 20 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	in := intake.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
}

// publish sends a definition with plain core NATS, as any client may.
func (e *env) publish(t testing.TB, subject, body string, header nats.Header) {
	t.Helper()
	if err := e.nc.PublishMsg(&nats.Msg{Subject: subject, Data: []byte(body), Header: header}); err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// pending is how many messages the intake stream holds (acknowledged ones leave it).
func (e *env) pending(t testing.TB) uint64 {
	t.Helper()
	s, err := e.js.Stream(context.Background(), subjects.IntakeStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// watch subscribes to events on subject before anything is published.
func (e *env) watch(t testing.TB, subject string) *nats.Subscription {
	t.Helper()
	sub, err := e.nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sub
}

// nextEvent is the next event sub receives, within 5 s.
func nextEvent(t testing.TB, sub *nats.Subscription) bus.Event {
	t.Helper()
	msg, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no event on %s: %v", sub.Subject, err)
	}
	var ev bus.Event
	if err := json.Unmarshal(msg.Data, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func (e *env) exists(c, j string) bool {
	_, err := e.svc.GetJob(context.Background(), c, j)
	return err == nil
}

func TestPlainPublishIsStored(t *testing.T) {
	e := newEnv(t)
	e.run(t, e.svc)
	e.publish(t, "scheduler.jobs.c.j", definition, nil)
	testenv.Eventually(t, 5*time.Second, "the job to be stored", func() bool { return e.exists("c", "j") })
	d, err := e.svc.GetJob(context.Background(), "c", "j")
	if err != nil || d.Properties.Recurrence.Frequency != job.Hour || d.Properties.Status.NextExecutionTime == nil ||
		!d.Properties.Status.NextExecutionTime.Equal(time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("stored %+v (%v)", d, err)
	}
	testenv.Eventually(t, 5*time.Second, "the message to be acknowledged", func() bool { return e.pending(t) == 0 })
}

// A definition published while no planner runs waits in the stream.
func TestPublishedBeforeTheIntakeRuns(t *testing.T) {
	e := newEnv(t)
	e.publish(t, "scheduler.jobs.c.early", definition, nil)
	testenv.Eventually(t, 5*time.Second, "the stream to hold the definition", func() bool { return e.pending(t) == 1 })
	if e.exists("c", "early") {
		t.Fatal("stored before any intake ran")
	}
	e.run(t, e.svc)
	testenv.Eventually(t, 5*time.Second, "the job to be stored", func() bool { return e.exists("c", "early") })
}

func TestDeleteHeader(t *testing.T) {
	e := newEnv(t)
	e.run(t, e.svc)
	e.publish(t, "scheduler.jobs.c.j", definition, nil)
	testenv.Eventually(t, 5*time.Second, "the job to be stored", func() bool { return e.exists("c", "j") })
	del := nats.Header{bus.HeaderOperation: []string{"delete"}}
	e.publish(t, "scheduler.jobs.c.j", "", del)
	testenv.Eventually(t, 5*time.Second, "the job to be deleted", func() bool { return !e.exists("c", "j") })
	// a delete of a job that is not there is settled too, and the next message still flows
	e.publish(t, "scheduler.jobs.c.never", "", del)
	e.publish(t, "scheduler.jobs.c.after", definition, nil)
	testenv.Eventually(t, 5*time.Second, "the next job to be stored", func() bool { return e.exists("c", "after") })
	testenv.Eventually(t, 5*time.Second, "every message to be acknowledged", func() bool { return e.pending(t) == 0 })
}

// An invalid definition is not retried: the rejected event carries the errors, nothing is stored.
func TestInvalidDefinitionIsRejected(t *testing.T) {
	e := newEnv(t)
	sub := e.watch(t, "scheduler.events.c.bad.rejected")
	e.run(t, e.svc)
	e.publish(t, "scheduler.jobs.c.bad", `{"action": {"type": "Http", "request": {"uri": "http://localhost/hook", "method": "POST"}},
	  "recurrence": {"frequency": "Month", "schedule": {"monthDays": [15, 30, -32]}}}`, nil)
	ev := nextEvent(t, sub)
	var paths []string
	for _, p := range ev.Errors {
		paths = append(paths, p.Path)
	}
	if ev.Kind != bus.EventRejected || ev.Collection != "c" || ev.Job != "bad" || !slices.Contains(paths, "recurrence.schedule.monthDays[2]") {
		t.Fatalf("rejected event %+v", ev)
	}
	testenv.Eventually(t, 5*time.Second, "the message to be acknowledged", func() bool { return e.pending(t) == 0 })
	if e.exists("c", "bad") {
		t.Fatal("an invalid definition was stored")
	}
	if _, err := sub.NextMsg(100 * time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("a second rejected event (retried?): %v", err)
	}
}

// A subject that names no job, or an unknown operation, is dropped and does not block the
// stream; an unknown operation is reported to its publisher.
func TestMalformedMessagesAreDropped(t *testing.T) {
	e := newEnv(t)
	sub := e.watch(t, "scheduler.events.c.j.rejected")
	e.run(t, e.svc)
	e.publish(t, "scheduler.jobs.c", definition, nil)
	e.publish(t, "scheduler.jobs.c.j.extra", definition, nil)
	e.publish(t, "scheduler.jobs.c.j", definition, nats.Header{bus.HeaderOperation: []string{"explode"}})
	e.publish(t, "scheduler.jobs.c.good", definition, nil)
	testenv.Eventually(t, 5*time.Second, "the good job to be stored", func() bool { return e.exists("c", "good") })
	testenv.Eventually(t, 5*time.Second, "every message to leave the stream", func() bool { return e.pending(t) == 0 })
	if e.exists("c", "j") {
		t.Fatal("a message with an unknown operation was applied")
	}
	ev := nextEvent(t, sub)
	if ev.Kind != bus.EventRejected || ev.Job != "j" || ev.IntakeSequence != 3 || len(ev.Errors) != 1 ||
		ev.Errors[0].Path != bus.HeaderOperation || !strings.Contains(ev.Errors[0].Message, `"explode"`) {
		t.Fatalf("rejected event %+v", ev)
	}
}

// failing fails its first puts as Redis down would (or with err), then passes them to the real
// service.
type failing struct {
	intake.Jobs
	mu     sync.Mutex
	fails  int
	err    error
	panics bool // fail by panicking, as a bug would
	calls  int
}

func (f *failing) Apply(ctx context.Context, changes []jobs.Change) []jobs.Outcome {
	f.mu.Lock()
	f.calls++
	fail := f.calls <= f.fails
	f.mu.Unlock()
	if fail && f.panics {
		var m map[string]int
		m["x"]++ // a nil map
	}
	if fail {
		out := make([]jobs.Outcome, len(changes))
		for i := range out {
			out[i].Err = cmp.Or(f.err, errors.New("redis: connection refused"))
		}
		return out
	}
	return f.Jobs.Apply(ctx, changes)
}

func (f *failing) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// A failure inside the planner is retried until it passes: nothing is lost.
func TestInternalFailureIsRetried(t *testing.T) {
	e := newEnv(t)
	svc := &failing{Jobs: e.svc, fails: 2}
	e.run(t, svc)
	e.publish(t, "scheduler.jobs.c.j", definition, nil)
	testenv.Eventually(t, 5*time.Second, "the job to be stored after the failures", func() bool { return e.exists("c", "j") })
	if got := svc.count(); got != 3 {
		t.Fatalf("%d attempts, want 3", got)
	}
	testenv.Eventually(t, 5*time.Second, "the message to be acknowledged", func() bool { return e.pending(t) == 0 })
}

// A panic inside the planner (a bug that a change trips) hands the change back, logged with its
// stack, and it is retried until it passes: the planner goes on. Unrecovered, it stopped the
// planner, and the change, taken again, each planner after it.
func TestAPanicHandsTheBatchBack(t *testing.T) {
	e := newEnv(t)
	svc := &failing{Jobs: e.svc, fails: 2, panics: true}
	logs := &testenv.LogBuffer{}
	e.run(t, svc, func(c *intake.Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	e.publish(t, "scheduler.jobs.c.j", definition, nil)
	testenv.Eventually(t, 5*time.Second, "the job to be stored after the panics", func() bool { return e.exists("c", "j") })
	if got := svc.count(); got != 3 {
		t.Fatalf("%d attempts, want 3", got)
	}
	if out := logs.String(); strings.Count(out, "panic recovered: intake message") != 2 {
		t.Errorf("the intake logged:\n%s\nwant each panic", out)
	}
	testenv.Eventually(t, 5*time.Second, "the message to be acknowledged", func() bool { return e.pending(t) == 0 })
}

// A put met by its Redis Cluster slot moving (a reshard) is retried the same way, and logged
// as what it is, not as an error.
func TestSlotMovingIsRetriedAndNotLoggedAsAnError(t *testing.T) {
	e := newEnv(t)
	svc := &failing{Jobs: e.svc, fails: 2, err: errors.New("TRYAGAIN Multiple keys request during rehashing of slot")}
	logs := &testenv.LogBuffer{}
	e.run(t, svc, func(c *intake.Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	e.publish(t, "scheduler.jobs.c.j", definition, nil)
	testenv.Eventually(t, 5*time.Second, "the job to be stored after the slot moved", func() bool { return e.exists("c", "j") })
	out := logs.String()
	if strings.Count(out, "slot is moving; retrying") != 2 || strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("the intake logged:\n%s\nwant two slot-moving lines and no error", out)
	}
}

// A change left unchecked because its batch took half the time allowed (jobs.ErrNotChecked)
// comes again at once and is applied, with no error logged.
func TestAChangeLeftUncheckedComesAgain(t *testing.T) {
	e := newEnv(t)
	svc := &failing{Jobs: e.svc, fails: 1, err: jobs.ErrNotChecked}
	logs := &testenv.LogBuffer{}
	e.run(t, svc, func(c *intake.Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	e.publish(t, "scheduler.jobs.c.j", definition, nil)
	testenv.Eventually(t, 5*time.Second, "the job to be stored after it was left unchecked", func() bool { return e.exists("c", "j") })
	if out := logs.String(); strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("the intake logged an error:\n%s", out)
	}
	testenv.Eventually(t, 5*time.Second, "the message to be acknowledged", func() bool { return e.pending(t) == 0 })
}

// A definition published while Redis is at its maxmemory waits on the stream and is stored
// once memory is freed. Its publisher hears why at once, in one deferred event, and the log
// has one warning for it, not an error at each of its many retries.
func TestADefinitionRedisRefusesWaitsAndIsSaidSo(t *testing.T) {
	e := newEnv(t)
	logs := &testenv.LogBuffer{}
	e.run(t, e.svc, func(c *intake.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		c.Events = e.nc
	})
	sub := e.watch(t, "scheduler.events.c.j.*")
	rdb := e.redis.Client(t)
	ctx := context.Background()
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil { // any use is over it
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.ConfigSet(ctx, "maxmemory", "0").Err() })
	e.publish(t, "scheduler.jobs.c.j", definition, nil)
	ev := nextEvent(t, sub)
	if ev.Kind != bus.EventDeferred || ev.IntakeSequence == 0 || !strings.Contains(ev.Reason, "maxmemory") {
		t.Fatalf("first event %+v, want deferred with the message's sequence and the reason", ev)
	}
	cons, err := e.js.Consumer(ctx, subjects.IntakeStream(), bus.IntakeConsumer)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the definition delivered five times", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.Delivered.Consumer >= 5
	})
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, sub); ev.Kind != bus.EventAccepted || ev.IntakeSequence == 0 {
		t.Fatalf("event once memory is freed %+v, want accepted (one deferred event only)", ev)
	}
	if !e.exists("c", "j") {
		t.Fatal("the job is not stored")
	}
	out := logs.String()
	if strings.Count(out, "cannot store the change now") != 1 || strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("the intake logged:\n%s\nwant one warning and no error", out)
	}
}

// blocking holds each put until released, to stop the intake while it has a message in hand.
type blocking struct {
	intake.Jobs
	entered chan struct{}
	release chan struct{}
}

func (b *blocking) Apply(ctx context.Context, changes []jobs.Change) []jobs.Outcome {
	b.entered <- struct{}{}
	<-b.release
	return b.Jobs.Apply(ctx, changes)
}

// Stopping the intake finishes the message in hand: it is stored and acknowledged.
func TestStopFinishesTheMessageInHand(t *testing.T) {
	e := newEnv(t)
	svc := &blocking{Jobs: e.svc, entered: make(chan struct{}), release: make(chan struct{})}
	in := intake.New(intake.Config{JS: e.js, Jobs: svc, Subjects: subjects})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	e.publish(t, "scheduler.jobs.c.j", definition, nil)
	select {
	case <-svc.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the intake never took the message")
	}
	cancel()
	close(svc.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if !e.exists("c", "j") {
		t.Fatal("the message in hand was not applied")
	}
	testenv.Eventually(t, 5*time.Second, "the message to be acknowledged", func() bool { return e.pending(t) == 0 })
}

// A consumer deleted under a running intake (an operator's mistake) is set up again.
func TestConsumerDeletedIsRecreated(t *testing.T) {
	e := newEnv(t)
	e.run(t, e.svc)
	e.publish(t, "scheduler.jobs.c.before", definition, nil)
	testenv.Eventually(t, 5*time.Second, "the first job to be stored", func() bool { return e.exists("c", "before") })
	if err := e.js.DeleteConsumer(context.Background(), subjects.IntakeStream(), bus.IntakeConsumer); err != nil {
		t.Fatal(err)
	}
	e.publish(t, "scheduler.jobs.c.after", definition, nil)
	testenv.Eventually(t, 5*time.Second, "the job published after the deletion to be stored", func() bool { return e.exists("c", "after") })
}
