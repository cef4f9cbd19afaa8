package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
	"github.com/resched/resched/services/planner/internal/leasetest"
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
	redisClient *redis.Client                  // nil over a cluster
	redisCPU    func(testing.TB) time.Duration // the CPU every Redis server has used so far
	clock       *clock
	store       *store.Store
	svc         *jobs.Service
	js          jetstream.JetStream
	subj        bus.Subjects
	leases      *leasetest.All
	validator   *jobschema.Validator
}

func setup(t testing.TB, redisOpts ...redistest.Option) *env {
	t.Helper()
	rs := redistest.Start(t, redisOpts...)
	rc := rs.Client(t)
	e := setupOn(t, rc, rs.CPU)
	e.redis, e.redisClient = rs, rc
	return e
}

// setupCluster is setup against a Redis Cluster of 3 masters without replicas.
func setupCluster(t testing.TB) *env {
	t.Helper()
	c := redistest.StartCluster(t, 3, 0)
	return setupOn(t, c.Client(t), c.CPU)
}

func setupOn(t testing.TB, rc redis.UniversalClient, cpu func(testing.TB) time.Duration) *env {
	t.Helper()
	ctx := context.Background()
	ns := natstest.Start(t)
	nc, _, subj := ns.JetStream(t)
	js, err := jetstream.New(nc, dispatch.JetStreamOptions(0, 0)...) // as the planner publishes
	if err != nil {
		t.Fatal(err)
	}
	v, err := jobschema.New()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, nats: ns, redisCPU: cpu, clock: newClock(t0), store: store.New(rc, ""), js: js, subj: subj, validator: v}
	e.svc = jobs.New(jobs.Config{Store: e.store, Validator: v, Subjects: subj, Clock: e.clock.now})
	if _, _, err := e.svc.PutCollection(ctx, "c", []byte(`{"properties":{}}`), false); err != nil {
		t.Fatal(err)
	}
	e.leases = leasetest.HoldAll(t, e.store)
	return e
}

// useRealClock makes the jobs service accept definitions at the real time, as the planner
// does: for the tests of the real loop.
func (e *env) useRealClock() {
	e.svc = jobs.New(jobs.Config{Store: e.store, Validator: e.validator, Subjects: e.subj})
}

func (e *env) dispatcher(m dispatch.Metrics) *dispatch.Dispatcher {
	return dispatch.New(dispatch.Config{Store: e.store, JS: e.js, Leases: e.leases, Subjects: e.subj, Clock: e.clock.now,
		Metrics: m, MaxIdle: 5 * time.Millisecond})
}

func (e *env) put(name, props string) {
	e.t.Helper()
	if _, _, err := e.svc.PutJob(context.Background(), "c", name, []byte(props), false); err != nil {
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
	stream, err := e.js.Stream(ctx, e.subj.DueStream())
	if err != nil {
		e.t.Fatal(err)
	}
	var out []bus.Due
	for {
		// Every message up to the stream's last, which is exact once the publishes are
		// acknowledged. The consumer's own count of pending messages is not: a busy server
		// counted a message stored just before as not pending yet (and FetchNoWait may
		// answer before it has the messages ready for a consumer).
		si, err := stream.Info(ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		left := si.State.LastSeq - info.AckFloor.Stream
		if si.State.LastSeq <= info.AckFloor.Stream {
			return out
		}
		batch, err := cons.Fetch(int(min(left, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			e.t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			var d bus.Due
			if err := json.Unmarshal(m.Data(), &d); err != nil {
				e.t.Fatal(err)
			}
			id, want := m.Headers().Get(bus.HeaderMsgID), bus.MsgID(d.Collection, d.Job, d.Incarnation, d.Scheduled)
			if id != want && !strings.HasPrefix(id, want+".run.") || d.ExecutionTag != bus.TagOf(id) {
				e.t.Errorf("message id %q, tag %q; want %q (or a run-now's) and the tag of the id", id, d.ExecutionTag, want)
			}
			out = append(out, d)
			// Confirmed, so that the next look at the acknowledgement floor counts it.
			if err := m.DoubleAck(ctx); err != nil {
				e.t.Fatal(err)
			}
			n++
		}
		if n == 0 {
			e.t.Fatalf("the stream holds messages up to %d, the consumer acknowledged up to %d, and none came", si.State.LastSeq, info.AckFloor.Stream)
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
	rec, _ := e.store.GetJob(context.Background(), "c", "j")
	first := got[0]
	if first.Occurrence != 1 || got[2].Occurrence != 3 || first.Incarnation == 0 || first.Incarnation != rec.Incarnation ||
		first.ExecutionTag != bus.ExecutionTag("c", "j", rec.Incarnation, first.Scheduled) {
		t.Errorf("occurrence numbers/incarnations/tags: %+v", got)
	}
	var a job.Action
	if err := json.Unmarshal(first.Action, &a); err != nil || a.Request == nil || a.Request.Body != "hi" {
		t.Errorf("action in the message: %s (%v)", first.Action, err)
	}
	rec, _ = e.store.GetJob(context.Background(), "c", "j")
	if rec.Fired != 3 || !rec.Next.IsZero() {
		t.Errorf("after its count: fired %d, next %v", rec.Fired, rec.Next)
	}
}

// A planner that published and died before advancing: the next holder of the partition
// publishes the occurrence again with the same message id, and JetStream drops it.
func TestRepublishIsDeduplicated(t *testing.T) {
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Hour"}}`)
	d := e.dispatcher(nil)
	rec, _ := e.store.GetJob(context.Background(), "c", "j")
	msg := jetstream.WithMsgID(bus.MsgID("c", "j", rec.Incarnation, t0))
	if _, err := e.js.Publish(context.Background(), e.subj.Due("c", "j"), bus.AppendDue(nil, "c", "j", rec.Incarnation, t0, 1, nil), msg); err != nil {
		t.Fatal(err)
	}
	e.clock.set(t0.Add(3 * time.Second))
	e.once(d)
	if got := e.drain(); len(got) != 1 {
		t.Fatalf("the occurrence is in the due stream %d times", len(got))
	}
	rec, _ = e.store.GetJob(context.Background(), "c", "j")
	if !rec.Next.Equal(t0.Add(time.Hour)) {
		t.Errorf("not advanced after the re-publish: next %v", rec.Next)
	}
}

// Every planner down for three hours: the every-minute job fires once, at its latest
// occurrence (the Latest policy), and the 180 missed ones are one Skipped history entry, not a
// burst.
func TestOutageCatchUpLatestFiresOnceAndRecordsTheSkipped(t *testing.T) {
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Minute"}}`)
	e.leases.SetOutages(store.Outage{From: t0.Add(-time.Second), To: t0.Add(3*time.Hour + 20*time.Second)})
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
	if want := "skipped 180 missed occurrence(s) from 2026-03-01T12:00:00Z to 2026-03-01T14:59:00Z: 121 more than the catch-up window (1h0m0s) late; 59 no planner ran"; !strings.HasPrefix(h[0].Message, want) {
		t.Errorf("history message %q, want it to start %q", h[0].Message, want)
	}
	rec, _ := e.store.GetJob(context.Background(), "c", "j")
	if rec.Fired != 1 || !rec.Next.Equal(t0.Add(3*time.Hour+time.Minute)) {
		t.Errorf("after catch-up: fired %d (skipped must not count), next %v", rec.Fired, rec.Next)
	}
}

// While an outage settles, a job due in it waits (the catch-up policy cannot tell yet what it
// fires) and a job due after it fires at its time; once the outage counts, the waiting job
// fires as its policy says.
func TestSettlingOutageHoldsBackOnlyItsOwnOccurrences(t *testing.T) {
	e := setup(t)
	end := t0.Add(time.Hour)
	e.put("in-outage", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Minute"}}`)
	e.put("after", `{"startTime":"2026-03-01T13:00:01Z",`+action+`}`)
	e.leases.HoldBack(end)
	e.clock.set(end.Add(2 * time.Second))
	e.once(e.dispatcher(nil))
	got := e.drain()
	if len(got) != 1 || got[0].Job != "after" {
		t.Fatalf("while the outage settles fired %v %v, want only the job due after it", jobNames(got), times(got))
	}
	e.leases.HoldBack(time.Time{})
	e.leases.SetOutages(store.Outage{From: t0, To: end})
	e.once(e.dispatcher(nil))
	// The latest occurrence in the outage, then the one at its end (a planner ran from then).
	if got := e.drain(); fmt.Sprint(jobNames(got), times(got)) != "[in-outage in-outage] [2026-03-01T12:59:00Z 2026-03-01T13:00:00Z]" {
		t.Fatalf("once settled fired %v %v, want in-outage's latest occurrence in the outage and the one at its end", jobNames(got), times(got))
	}
}

// jobNames lists the jobs of due messages.
func jobNames(ds []bus.Due) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Job
	}
	return out
}

// Occurrences a live planner was only late with (its partition changed hands, Redis or NATS
// were away) all fire, in order, whatever the policy: nothing is skipped while a planner runs.
func TestLateWhilePlannersRanFiresEveryOccurrence(t *testing.T) {
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Second"}}`)
	e.clock.set(t0.Add(4*time.Second + 500*time.Millisecond))
	e.once(e.dispatcher(nil))
	if got := times(e.drain()); fmt.Sprint(got) != "[2026-03-01T12:00:00Z 2026-03-01T12:00:01Z 2026-03-01T12:00:02Z 2026-03-01T12:00:03Z 2026-03-01T12:00:04Z]" {
		t.Fatalf("fired %v, want each of the five late occurrences", got)
	}
	if h, _ := e.store.History(context.Background(), "c", "j", e.clock.now()); len(h) != 0 {
		t.Fatalf("history %+v: nothing may be skipped", h)
	}
	rec, _ := e.store.GetJob(context.Background(), "c", "j")
	if rec.Fired != 5 || rec.Occurrence != 5 || !rec.Next.Equal(t0.Add(5*time.Second)) {
		t.Errorf("after catching up: fired %d, occurrence %d, next %v", rec.Fired, rec.Occurrence, rec.Next)
	}
}

// The All policy (deployment-wide or the job's own recurrence.catchUpPolicy) fires every
// occurrence missed in an outage, in order, at most CatchUpRate per job per second; each
// occurrence is fired or skipped, never both.
func TestOutageCatchUpAllIsPacedAndComplete(t *testing.T) {
	for _, c := range []struct {
		name, catchUp string
		policy        job.CatchUpPolicy
	}{
		{"the deployment's policy", "", job.CatchUpAll},
		{"the job's own policy", `,"catchUpPolicy":"all"`, job.CatchUpLatest},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Second","interval":10`+c.catchUp+`}}`)
			e.leases.SetOutages(store.Outage{From: t0.Add(-time.Second), To: t0.Add(245 * time.Second)})
			d := dispatch.New(dispatch.Config{Store: e.store, JS: e.js, Leases: e.leases, Subjects: e.subj, Clock: e.clock.now,
				CatchUpPolicy: c.policy, CatchUpRate: 10})
			var got []bus.Due
			for i := range 4 {
				e.clock.set(t0.Add(250*time.Second + time.Duration(i)*time.Second))
				e.once(d)
				got = append(got, e.drain()...)
			}
			var want []string
			for s := 0; s <= 250; s += 10 { // 26 occurrences: 10, 10, then the last 6
				want = append(want, t0.Add(time.Duration(s)*time.Second).Format(time.RFC3339))
			}
			if fmt.Sprint(times(got)) != fmt.Sprint(want) {
				t.Fatalf("fired %v\nwant %v", times(got), want)
			}
			if h, _ := e.store.History(context.Background(), "c", "j", e.clock.now()); len(h) != 0 {
				t.Fatalf("history %+v: nothing may be skipped", h)
			}
		})
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

// A Suspended collection pauses its jobs as a Disabled one does, those put while it is
// suspended too, and a put moving it from one paused state to the other keeps the new state.
// Suspended once paused nothing: the scripts looked for Disabled alone, while the API, schedctl
// and the dashboard called the jobs paused.
func TestASuspendedCollectionPausesItsJobs(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Minute"}}`)
	d := e.dispatcher(nil)
	putState := func(state job.CollectionState) {
		t.Helper()
		c, _, err := e.svc.PutCollection(ctx, "c", []byte(`{"properties":{"state":"`+state+`"}}`), false)
		if err != nil || c.Properties.State != state {
			t.Fatalf("put the collection %s: %+v, %v", state, c, err)
		}
	}
	putState(job.CollectionSuspended)
	e.put("k", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Minute"}}`)
	e.clock.set(t0.Add(10 * time.Minute))
	if n := e.once(d); n != 0 {
		t.Fatalf("a suspended collection fired %d", n)
	}
	runs, err := e.svc.Runs(ctx, "c", "j", 3)
	if err != nil || len(runs.Value) != 0 || !strings.Contains(runs.Reason, "suspended") {
		t.Fatalf("the next runs of a job of a suspended collection: %+v, %v", runs, err)
	}
	putState(job.CollectionDisabled)
	e.clock.set(t0.Add(15 * time.Minute))
	if n := e.once(d); n != 0 {
		t.Fatalf("a disabled collection fired %d", n)
	}
	putState(job.CollectionEnabled)
	e.clock.set(t0.Add(16 * time.Minute))
	e.once(d)
	if got := e.drain(); fmt.Sprint(times(got)) != "[2026-03-01T12:16:00Z 2026-03-01T12:16:00Z]" {
		t.Fatalf("after enabling: %v", times(got))
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

// A job deleted and put again under its name is a new job, also to JetStream's duplicate
// window: its occurrence at the time of one the deleted job had published (claimed within the
// lookahead just before the delete) fires, and targets see another execution tag. With ids of
// the job and time alone, the new job's occurrence was dropped as a re-publish of the old one.
func TestJobPutAgainFiresAtTheTimeOfTheDeletedJobsOccurrence(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	def := `{"startTime":"2026-03-01T12:00:00Z",` + action + `,"recurrence":{"frequency":"Minute"}}`
	e.put("j", def)
	d := e.dispatcher(nil)
	e.once(d)
	old := e.drain()
	if err := e.svc.DeleteJob(ctx, "c", "j"); err != nil {
		t.Fatal(err)
	}
	e.put("j", def)
	if n := e.once(d); n != 1 {
		t.Fatalf("the job put again published %d occurrences at %v, want 1", n, t0)
	}
	got := e.drain()
	if len(old) != 1 || len(got) != 1 {
		t.Fatalf("the deleted job's occurrences %v, the new job's %v; want one each, at %v", times(old), times(got), t0)
	}
	if !got[0].Scheduled.Equal(t0) || got[0].Incarnation == old[0].Incarnation || got[0].ExecutionTag == old[0].ExecutionTag {
		t.Fatalf("the new job's occurrence %+v shares the deleted job's incarnation or tag (%+v)", got[0], old[0])
	}
}

type counter struct {
	published atomic.Int64
	mu        sync.Mutex
	claims    []int // the size of every claim that took jobs
}

func (c *counter) Claimed(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claims = append(c.claims, n)
}

// wantClaims fails t unless the claims that took jobs took these many, in this order (why
// says what that means).
func (c *counter) wantClaims(t *testing.T, want []int, why string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Equal(c.claims, want) {
		t.Errorf("claims %v, want %s", c.claims, why)
	}
}

func (c *counter) Published(n int)       { c.published.Add(int64(n)) }
func (c *counter) Skipped(int)           {}
func (c *counter) FireLag(time.Duration) {}
func (c *counter) Error(string)          {}

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

// A run-now in the very millisecond of a scheduled occurrence is an occurrence of its own: its
// message id and execution tag differ, so JetStream drops neither.
func TestRunNowInTheMillisecondOfAScheduledOccurrence(t *testing.T) {
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Hour"}}`)
	d := e.dispatcher(nil)
	if err := d.RunNow(context.Background(), "c", "j"); err != nil {
		t.Fatal(err)
	}
	if err := d.RunNow(context.Background(), "c", "j"); err != nil { // a second click, same millisecond
		t.Fatal(err)
	}
	e.once(d)
	got := e.drain()
	tags := map[string]bool{}
	for _, m := range got {
		tags[m.ExecutionTag] = true
	}
	if len(got) != 3 || len(tags) != 3 {
		t.Fatalf("two run-nows and the scheduled occurrence of %s gave %d messages with %d tags: %+v", t0, len(got), len(tags), got)
	}
}

// A stored definition that no longer compiles (here: a time zone the tz database dropped) is
// parked Faulted with a history entry saying why, and is read no more, instead of failing and
// being logged at every round forever.
func TestUncompilableDefinitionIsParkedFaulted(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Minute"}}`)
	key := fmt.Sprintf("resched:{p%02d}:def:c/j", e.store.PartitionOf("c"))
	if err := e.redisClient.Set(ctx, key, `{"recurrence":{"frequency":"Minute","timeZone":"Mars/Olympus_Mons"}}`+"\n"+`{"type":"Http"}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	m := &stageCounter{}
	d := e.dispatcher(m)
	e.clock.set(t0.Add(time.Second))
	e.once(d)
	rec, _ := e.store.GetJob(ctx, "c", "j")
	h, _ := e.store.History(ctx, "c", "j", e.clock.now())
	if rec.State != job.StateFaulted || len(h) != 1 || !strings.Contains(h[0].Message, "no longer compiles") {
		t.Fatalf("state %s, history %+v; want Faulted with one entry saying why", rec.State, h)
	}
	e.clock.set(t0.Add(time.Hour))
	e.once(d)
	if n := m.errors()["prepare"]; n != 1 {
		t.Fatalf("the parked job was read again: %d prepare errors", n)
	}
}

// A startTime with a fraction of a second never fires before the instant asked for.
func TestFractionalStartNeverFiresEarly(t *testing.T) {
	e := setup(t)
	e.put("j", `{"startTime":"2026-03-01T12:00:10.250Z",`+action+`}`)
	d := e.dispatcher(nil)
	e.clock.set(t0.Add(10*time.Second + 500*time.Millisecond))
	e.once(d)
	if got := e.drain(); len(got) != 0 {
		t.Fatalf("fired %v before 12:00:10.250", times(got))
	}
	e.clock.set(t0.Add(11 * time.Second))
	e.once(d)
	if got := times(e.drain()); fmt.Sprint(got) != "[2026-03-01T12:00:11Z]" {
		t.Fatalf("fired %v", got)
	}
}
