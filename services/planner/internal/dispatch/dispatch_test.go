package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/redistest"
	"github.com/resched/resched/services/planner/internal/dispatch"
	"github.com/resched/resched/services/planner/internal/jobs"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/jobschema"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable clock shared by the service and the dispatchers of a test.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock { c := &clock{}; c.set(t); return c }
func (c *clock) now() time.Time   { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) set(t time.Time)  { c.ns.Store(t.UnixNano()) }

type env struct {
	t           testing.TB
	nats        *natstest.Server
	redis       *redistest.Server
	redisClient *redis.Client
	clock       *clock
	store       *store.Store
	svc         *jobs.Service
	js          jetstream.JetStream
	subj        bus.Subjects
}

func setup(t testing.TB, redisOpts ...redistest.Option) *env {
	t.Helper()
	ctx := context.Background()
	ns := natstest.Start(t)
	nc := ns.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	subj := bus.NewSubjects("")
	if err := bus.EnsureStreams(ctx, js, subj, bus.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	v, err := jobschema.New()
	if err != nil {
		t.Fatal(err)
	}
	rs := redistest.Start(t, redisOpts...)
	rc := rs.Client(t)
	e := &env{t: t, nats: ns, redis: rs, redisClient: rc, clock: newClock(t0), store: store.New(rc, ""), js: js, subj: subj}
	e.svc = jobs.New(jobs.Config{Store: e.store, Validator: v, Subjects: subj, Clock: e.clock.now})
	if _, _, err := e.svc.PutCollection(ctx, "c", []byte(`{"properties":{}}`)); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) dispatcher(m dispatch.Metrics) *dispatch.Dispatcher {
	return dispatch.New(dispatch.Config{Store: e.store, JS: e.js, Subjects: e.subj, Clock: e.clock.now, Metrics: m,
		Lease: 30 * time.Second, MaxIdle: 5 * time.Millisecond})
}

func (e *env) put(name, props string) {
	e.t.Helper()
	if _, _, err := e.svc.PutJob(context.Background(), "c", name, []byte(props)); err != nil {
		e.t.Fatalf("put %s: %v", name, err)
	}
}

const action = `"action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x","body":"hi","headers":{"Content-Type":"text/plain"}}}`

// drain reads every due message published so far.
func (e *env) drain() []bus.Due {
	e.t.Helper()
	ctx := context.Background()
	cons, err := e.js.CreateOrUpdateConsumer(ctx, e.subj.DueStream(), jetstream.ConsumerConfig{Durable: "test", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []bus.Due
	for {
		batch, err := cons.FetchNoWait(1000)
		if err != nil {
			e.t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			var d bus.Due
			if err := json.Unmarshal(m.Data(), &d); err != nil {
				e.t.Fatal(err)
			}
			if got, want := m.Headers().Get(bus.HeaderMsgID), bus.MsgID(d.Collection, d.Job, d.Scheduled); got != want {
				e.t.Errorf("message id %q, want %q", got, want)
			}
			out = append(out, d)
			_ = m.Ack()
			n++
		}
		if n == 0 {
			return out
		}
	}
}

func (e *env) once(d *dispatch.Dispatcher) int {
	e.t.Helper()
	n, err := d.DispatchOnce(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func times(ds []bus.Due) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Scheduled.Format(time.RFC3339))
	}
	return out
}

func TestFiresAtScheduledTimesAndAdvances(t *testing.T) {
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:10Z",`+action+`,"recurrence":{"frequency":"Second","interval":5,"count":3}}`)
	d := e.dispatcher(nil)
	if n := e.once(d); n != 0 {
		t.Fatalf("fired %d occurrences before the start time", n)
	}
	var got []bus.Due
	for _, at := range []string{"12:00:10", "12:00:14", "12:00:15", "12:00:20", "12:00:25"} {
		e.clock.set(mustTime(t, "2026-03-01T"+at+"Z"))
		e.once(d)
		got = append(got, e.drain()...)
	}
	if fmt.Sprint(times(got)) != "[2026-03-01T12:00:10Z 2026-03-01T12:00:15Z 2026-03-01T12:00:20Z]" {
		t.Fatalf("fired at %v", times(got))
	}
	first := got[0]
	if first.Occurrence != 1 || got[2].Occurrence != 3 || first.ExecutionTag != bus.ExecutionTag("c", "j", first.Scheduled) {
		t.Errorf("occurrence numbers/tags: %+v", got)
	}
	var a job.Action
	if err := json.Unmarshal(first.Action, &a); err != nil || a.Request == nil || a.Request.Body != "hi" {
		t.Errorf("action in the message: %s (%v)", first.Action, err)
	}
	rec, _ := e.store.GetJob(context.Background(), "c", "j")
	if rec.Fired != 3 || !rec.Next.IsZero() {
		t.Errorf("after its count: fired %d, next %v", rec.Fired, rec.Next)
	}
}

// A planner that dies between claim and publish loses nothing: after its lease, another
// planner publishes the occurrence, once, with its scheduled time.
func TestKilledBetweenClaimAndPublish(t *testing.T) {
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Hour"}}`)
	if got, err := e.store.Claim(context.Background(), store.PartitionOf("c"), t0, t0.Add(30*time.Second), 10); err != nil || len(got) != 1 {
		t.Fatalf("the dying planner's claim: %v %v", got, err)
	}
	d := e.dispatcher(nil)
	e.clock.set(t0.Add(29 * time.Second))
	if n := e.once(d); n != 0 {
		t.Fatalf("published %d while another planner held the lease", n)
	}
	e.clock.set(t0.Add(30 * time.Second))
	e.once(d)
	got := e.drain()
	if fmt.Sprint(times(got)) != "[2026-03-01T12:00:00Z]" {
		t.Fatalf("after the lease: %v", times(got))
	}
}

// A planner that published and died before advancing: the re-publish after its lease carries
// the same message id and JetStream drops it.
func TestRepublishIsDeduplicated(t *testing.T) {
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Hour"}}`)
	d := e.dispatcher(nil)
	// The first planner: claims and publishes, but its advance never happens. Simulate it with
	// a RunNow-free publish of the same id.
	if got, _ := e.store.Claim(context.Background(), store.PartitionOf("c"), t0, t0.Add(30*time.Second), 10); len(got) != 1 {
		t.Fatal("claim")
	}
	msg := jetstream.WithMsgID(bus.MsgID("c", "j", t0))
	if _, err := e.js.Publish(context.Background(), e.subj.Due("c", "j"), []byte(`{"collection":"c","job":"j","scheduledTime":"2026-03-01T12:00:00Z"}`), msg); err != nil {
		t.Fatal(err)
	}
	e.clock.set(t0.Add(31 * time.Second))
	e.once(d)
	if got := e.drain(); len(got) != 1 {
		t.Fatalf("the occurrence is in the due stream %d times", len(got))
	}
	rec, _ := e.store.GetJob(context.Background(), "c", "j")
	if !rec.Next.Equal(t0.Add(time.Hour)) {
		t.Errorf("not advanced after the re-publish: next %v", rec.Next)
	}
}

// Planners down for three hours: the every-minute job fires once, at its latest occurrence,
// and the 180 missed ones are one Skipped history entry, not a burst.
func TestCatchUpFiresOnceAndRecordsTheSkipped(t *testing.T) {
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Minute"}}`)
	e.clock.set(t0.Add(3*time.Hour + 30*time.Second))
	e.once(e.dispatcher(nil))
	got := e.drain()
	if fmt.Sprint(times(got)) != "[2026-03-01T15:00:00Z]" {
		t.Fatalf("after the outage fired %v", times(got))
	}
	h, err := e.store.History(context.Background(), "c", "j", e.clock.now())
	if err != nil || len(h) != 1 || h[0].Status != job.ExecutionSkipped || !h[0].ExpectedExecutionTime.Equal(t0) {
		t.Fatalf("history %+v %v", h, err)
	}
	if want := "skipped 180 missed"; len(h[0].Message) < len(want) || h[0].Message[:len(want)] != want {
		t.Errorf("history message %q", h[0].Message)
	}
	rec, _ := e.store.GetJob(context.Background(), "c", "j")
	if rec.Fired != 1 || !rec.Next.Equal(t0.Add(3*time.Hour+time.Minute)) {
		t.Errorf("after catch-up: fired %d (skipped must not count), next %v", rec.Fired, rec.Next)
	}
}

// A late occurrence beyond the window with nothing inside it fires nothing.
func TestCatchUpSkipsAnOccurrenceOlderThanTheWindow(t *testing.T) {
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Day"}}`)
	e.clock.set(t0.Add(2 * time.Hour))
	e.once(e.dispatcher(nil))
	if got := e.drain(); len(got) != 0 {
		t.Fatalf("fired %v two hours late", times(got))
	}
	rec, _ := e.store.GetJob(context.Background(), "c", "j")
	if !rec.Next.Equal(t0.Add(24*time.Hour)) || rec.State != job.StateEnabled {
		t.Errorf("after skipping: next %v, state %s", rec.Next, rec.State)
	}
}

func TestDisabledJobsAndCollectionsDoNotFire(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Minute"}}`)
	d := e.dispatcher(nil)
	if _, err := e.svc.DisableCollection(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	e.clock.set(t0.Add(10 * time.Minute))
	if n := e.once(d); n != 0 {
		t.Fatalf("a disabled collection fired %d", n)
	}
	e.clock.set(t0.Add(10*time.Minute + 30*time.Second))
	if _, err := e.svc.EnableCollection(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	e.once(d)
	if got := e.drain(); len(got) != 0 {
		t.Fatalf("enabling ran the missed times at once: %v", times(got))
	}
	e.clock.set(t0.Add(11 * time.Minute))
	e.once(d)
	if got := e.drain(); fmt.Sprint(times(got)) != "[2026-03-01T12:11:00Z]" {
		t.Fatalf("after enabling: %v", times(got))
	}
	if _, err := e.svc.PatchJob(ctx, "c", "j", []byte(`{"state":"Disabled"}`)); err != nil {
		t.Fatal(err)
	}
	e.clock.set(t0.Add(20 * time.Minute))
	if n := e.once(d); n != 0 {
		t.Fatalf("a disabled job fired %d", n)
	}
}

func TestDeletionStopsFutureFires(t *testing.T) {
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Minute"}}`)
	if err := e.svc.DeleteJob(context.Background(), "c", "j"); err != nil {
		t.Fatal(err)
	}
	e.clock.set(t0.Add(5 * time.Minute))
	if n := e.once(e.dispatcher(nil)); n != 0 {
		t.Fatalf("a deleted job fired %d", n)
	}
}

type counter struct{ published atomic.Int64 }

func (c *counter) Claimed(int)           {}
func (c *counter) Published(n int)       { c.published.Add(int64(n)) }
func (c *counter) Skipped(int)           {}
func (c *counter) FireLag(time.Duration) {}
func (c *counter) Error(string)          {}

// Three planners against one Redis and 10,000 due occurrences: each is published exactly once
// (counted at the publishers, so JetStream's de-duplication cannot hide a double publish).
func TestThreePlannersPublishEachOccurrenceOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 occurrences")
	}
	ctx := context.Background()
	e := setup(t)
	if _, _, err := e.svc.PutCollection(ctx, "c", []byte(`{"properties":{}}`)); err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	def := blob(t, `{"startTime":"2026-03-01T12:00:00Z",`+action+`}`)
	for i := range n {
		c := fmt.Sprintf("c%d", i%50) // many collections, so every partition has work
		if i < 50 {
			if _, _, err := e.svc.PutCollection(ctx, c, []byte(`{"properties":{}}`)); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := e.store.PutJob(ctx, store.PutJob{Collection: c, Name: fmt.Sprint("j", i), Definition: def,
			Accepted: t0, Next: t0, State: job.StateEnabled, Reaccept: true}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.set(t0.Add(time.Second))
	var count counter
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 3 {
		d := e.dispatcher(&count)
		wg.Go(func() { _ = d.Run(runCtx) })
	}
	waitFor(t, func() bool { return count.published.Load() >= n }, "10,000 publishes")
	cancel()
	wg.Wait()
	if got := count.published.Load(); got != n {
		t.Fatalf("published %d times for %d occurrences", got, n)
	}
	info, err := e.js.Stream(ctx, e.subj.DueStream())
	if err != nil {
		t.Fatal(err)
	}
	if msgs := info.CachedInfo().State.Msgs; msgs != n {
		t.Fatalf("due stream holds %d messages, want %d", msgs, n)
	}
	if backlog, _ := e.store.DueBacklog(ctx, t0.Add(time.Hour)); backlog != 0 {
		t.Fatalf("%d jobs still due", backlog)
	}
}

// blob turns a job definition into the form the store keeps, as the service would.
func blob(t testing.TB, def string) []byte {
	t.Helper()
	d, err := jobschema.Decode([]byte(def))
	if err != nil {
		t.Fatalf("definition %s: %v", def, err)
	}
	b, err := jobs.EncodeBlob(d.Properties)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
