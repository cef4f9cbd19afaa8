package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/dispatch"
	"github.com/resched/resched/services/planner/internal/lease"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// These tests run the real dispatch loop (Dispatcher.Run) of one or more planners, each with
// its own partition leases (package lease), on the real clock.

// loopLease is the lease TTL of these tests: short, so a takeover takes about a second.
const loopLease = time.Second

// plannerProc is one planner's dispatch side: its leases and its dispatcher's loop.
type plannerProc struct {
	d      *dispatch.Dispatcher
	leases *lease.Leases
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// woken holds the partitions whose acquisition has woken their dispatcher.
	woken sync.Map
}

// startPlanner runs a planner's leases and dispatcher until stop. The test's own leases are
// released first, so the planners share the partitions among themselves.
func (e *env) startPlanner(id string, m dispatch.Metrics, tune ...func(*dispatch.Config)) *plannerProc {
	e.t.Helper()
	e.leases.Release(e.t, e.store)
	ctx, cancel := context.WithCancel(context.Background())
	pp := &plannerProc{cancel: cancel}
	var d *dispatch.Dispatcher
	pp.leases = lease.New(lease.Config{Store: e.store, ID: id, TTL: loopLease, Start: time.Now(),
		Acquired: func(p int) { d.Wake(p); pp.woken.Store(p, true) }})
	cfg := dispatch.Config{Store: e.store, JS: e.js, Leases: pp.leases, Subjects: e.subj, Metrics: m}
	for _, t := range tune {
		t(&cfg)
	}
	d = dispatch.New(cfg)
	pp.d = d
	pp.wg.Go(func() { _ = pp.leases.Run(ctx) })
	pp.wg.Go(func() { _ = d.Run(ctx) })
	e.t.Cleanup(func() { pp.stop(true) })
	return pp
}

// stop ends the planner: cleanly (its leases given up, as at SIGTERM) or as kill -9 does
// (its leases left to run out).
func (pp *plannerProc) stop(clean bool) {
	pp.cancel()
	pp.wg.Wait()
	if clean {
		pp.leases.Leave(context.Background())
	}
}

// dueStream collects every message of the due stream as it arrives, with the time the stream
// stored it.
type dueStream struct {
	mu   sync.Mutex
	msgs []received
}

type received struct {
	due    bus.Due
	stored time.Time
}

func (e *env) watchDue() *dueStream {
	e.t.Helper()
	ds := &dueStream{}
	cons, err := e.js.CreateOrUpdateConsumer(context.Background(), e.subj.DueStream(),
		jetstream.ConsumerConfig{Durable: "watch", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: -1})
	if err != nil {
		e.t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var d bus.Due
		_ = json.Unmarshal(m.Data(), &d)
		md, _ := m.Metadata()
		ds.mu.Lock()
		ds.msgs = append(ds.msgs, received{due: d, stored: md.Timestamp})
		ds.mu.Unlock()
		_ = m.Ack()
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cc.Stop)
	return ds
}

func (ds *dueStream) all() []received {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return slices.Clone(ds.msgs)
}

// everySecond is a job firing every second with a GET of http://localhost:9/<path>.
func everySecond(path string) string {
	return `{"action":{"type":"Http","request":{"method":"GET","uri":"http://localhost:9/` + path + `"}},"recurrence":{"frequency":"Second"}}`
}

// uriOf is the URI of a due message's action.
func uriOf(r received) string {
	var a job.Action
	_ = json.Unmarshal(r.due.Action, &a)
	return a.Request.URI
}

// runNow is a job that runs once, at its put.
const runNow = `{"action":{"type":"Http","request":{"method":"GET","uri":"http://localhost:9/now"}}}`

// A partition woken by a put waits its WakeLinger for the puts that follow and takes them in one
// claim; a linger longer than the look it had planned ends at that look, not before, not after.
func TestLoopWakeLingerHoldsTheRoundUpToThePlannedLook(t *testing.T) {
	const maxIdle = 2 * time.Second
	e := setup(t)
	e.useRealClock()
	ds := e.watchDue()
	m := &counter{}
	pp := e.startPlanner("p1", m, func(c *dispatch.Config) { c.WakeLinger, c.MaxIdle = time.Hour, maxIdle })
	e.put("warm-up", runNow) // found when the lease is taken; the partition then sleeps maxIdle
	testenv.Eventually(t, 10*time.Second, "the warm-up job published", func() bool { return len(ds.all()) == 1 })
	e.put("a", runNow)
	pp.d.Wake(e.store.PartitionOf("c"))
	e.put("b", runNow)
	pp.d.Wake(e.store.PartitionOf("c"))
	testenv.Eventually(t, 10*time.Second, "both jobs published at the planned look, not after the hour's linger", func() bool { return len(ds.all()) == 3 })
	msgs := ds.all()
	// The round that published the warm-up ended after the stream stored it, and planned its
	// next look maxIdle later.
	if waited := msgs[1].stored.Sub(msgs[0].stored); waited < maxIdle {
		t.Errorf("the woken partition looked %v after the warm-up's round, before its planned look (%v): it did not linger", waited, maxIdle)
	}
	m.wantClaims(t, []int{1, 2}, "the warm-up alone, then both jobs in one")
}

// claimHook is a dispatcher's Metrics that runs during the first claim that takes jobs, as its
// round runs.
type claimHook struct {
	counter
	once sync.Once
	run  atomic.Pointer[func()]
}

func (h *claimHook) Claimed(n int) {
	h.counter.Claimed(n)
	h.once.Do(func() { (*h.run.Load())() })
}

// A job put while a round runs (after its read of what is due) waits the WakeLinger, as a job
// put while the partition slept: the next round does not start at once for it alone. At 1,000
// jobs a second put to run now, that round came for every three or four fires rather than ten.
func TestLoopPutDuringARoundLingersToo(t *testing.T) {
	const linger = 300 * time.Millisecond
	e := setup(t)
	e.useRealClock()
	ds := e.watchDue()
	h := &claimHook{}
	// The read of a round takes what is due within the lookahead, which a job put at that
	// moment is: what is due by then and still in the due set came after the read.
	pp := e.startPlanner("p1", h, func(c *dispatch.Config) { c.WakeLinger, c.MaxIdle, c.Lookahead = linger, time.Hour, time.Second })
	p := e.store.PartitionOf("c")
	putB := func() { e.put("b", runNow); pp.d.Wake(p) }
	h.run.Store(&putB)
	e.put("a", runNow)
	pp.d.Wake(p)
	testenv.Eventually(t, 10*time.Second, "both jobs published", func() bool { return len(ds.all()) == 2 })
	msgs := ds.all()
	if waited := msgs[1].stored.Sub(msgs[0].stored); waited < linger {
		t.Errorf("the job put during a round was published %v after that round's, within the linger (%v): the next round came at once", waited, linger)
	}
	h.wantClaims(t, []int{1, 1}, "one job each")
}

// A job put during a round that is due after the round's read (beyond its lookahead) is planned,
// not lingered for: the rounds after it come at their planned looks (every MaxIdle), so it goes
// out at its time, though a wake-up is pending and the linger is an hour.
func TestLoopPlannedJobPutDuringARoundIsNotLingeredFor(t *testing.T) {
	const lookahead = time.Second
	e := setup(t)
	e.useRealClock()
	ds := e.watchDue()
	h := &claimHook{}
	pp := e.startPlanner("p1", h, func(c *dispatch.Config) {
		c.WakeLinger, c.MaxIdle, c.Lookahead = time.Hour, 100*time.Millisecond, lookahead
	})
	// Due 2 to 3 s from now (a whole second), so after the lookahead of the round that takes
	// "a", which comes within MaxIdle.
	at := time.Now().Truncate(time.Second).Add(3 * time.Second)
	putLater := func() {
		e.put("later", `{"startTime":"`+at.UTC().Format(time.RFC3339)+`",`+action+`}`)
		pp.d.Wake(e.store.PartitionOf("c"))
	}
	h.run.Store(&putLater)
	e.put("a", runNow)
	testenv.Eventually(t, 10*time.Second, "the job put now and the planned one published", func() bool { return len(ds.all()) == 2 })
	if stored := ds.all()[1].stored; stored.Before(at) {
		t.Errorf("the planned job was published at %v, before its time %v", stored, at)
	}
	h.wantClaims(t, []int{1, 1}, "one job each")
}

// A stop is not held by a linger: the loop ends at once, though the linger and the planned look
// are an hour away.
func TestLoopStopEndsALinger(t *testing.T) {
	e := setup(t)
	e.useRealClock()
	pp := e.startPlanner("p1", nil, func(c *dispatch.Config) { c.WakeLinger, c.MaxIdle = time.Hour, time.Hour })
	// The acquisition's wake-up, once taken, begins a linger of an hour (no job, so nothing is
	// planned sooner).
	p := e.store.PartitionOf("c")
	testenv.Eventually(t, 10*time.Second, "the acquisition's wake-up taken", func() bool {
		_, woken := pp.woken.Load(p)
		return woken && !pp.d.WakePending(p)
	})
	stopped := make(chan struct{})
	go func() { pp.stop(true); close(stopped) }()
	testenv.Eventually(t, 10*time.Second, "the loop stopped while lingering", func() bool {
		select {
		case <-stopped:
			return true
		default:
			return false
		}
	})
}

// A job put, fired, deleted and put again under the same name is a new job: the loop fires it
// with its new action and numbering, never with the deleted job's (whose compiled schedule and
// action a dispatcher may still hold).
func TestLoopPutFireDeletePutAgain(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	e.useRealClock()
	ds := e.watchDue()
	e.startPlanner("p1", nil)
	e.put("j", everySecond("old"))
	testenv.Eventually(t, 10*time.Second, "two fires of the first job", func() bool { return len(ds.all()) >= 2 })
	if err := e.svc.DeleteJob(ctx, "c", "j"); err != nil {
		t.Fatal(err)
	}
	deleted := len(ds.all())
	e.put("j", everySecond("new"))
	testenv.Eventually(t, 10*time.Second, "two fires of the job put again", func() bool { return len(ds.all()) >= deleted+2 })
	msgs := ds.all()
	for i, m := range msgs {
		switch {
		case i < deleted-1 && uriOf(m) != "http://localhost:9/old":
			t.Fatalf("fire %d before the delete: %s", i, uriOf(m))
		case i >= deleted && uriOf(m) != "http://localhost:9/new":
			t.Fatalf("fire %d of the job put again carries the deleted job's action %s (occurrence %d)", i, uriOf(m), m.due.Occurrence)
		}
	}
	if first := msgs[deleted]; first.due.Occurrence != 1 {
		t.Fatalf("the job put again starts at occurrence %d, want 1", first.due.Occurrence)
	}
}

// A job put again with another action fires the new action from the next fire on, though the
// dispatcher holds the old one compiled (its cache is keyed by version).
func TestLoopPutAgainFiresTheNewAction(t *testing.T) {
	e := setup(t)
	e.useRealClock()
	ds := e.watchDue()
	e.startPlanner("p1", nil)
	e.put("j", everySecond("a"))
	testenv.Eventually(t, 10*time.Second, "three fires of the first action", func() bool { return len(ds.all()) >= 3 })
	e.put("j", everySecond("b"))
	before := len(ds.all())
	testenv.Eventually(t, 10*time.Second, "three fires after the put", func() bool { return len(ds.all()) >= before+3 })
	msgs := ds.all()
	if got := uriOf(msgs[len(msgs)-1]); got != "http://localhost:9/b" {
		t.Fatalf("the last fire, after the job was put again, carries %s", got)
	}
	for i, m := range msgs[:before-1] {
		if uriOf(m) != "http://localhost:9/a" {
			t.Fatalf("fire %d, before the put, carries %s", i, uriOf(m))
		}
	}
}

// A burst of 20,000 jobs due at once, dispatched with the default concurrency and batch: each
// occurrence is published once, and no publish stalls (more publishes in flight than the
// JetStream context allows would stall and drop some, and their jobs would fire late).
func TestLoopBurstOf20000PublishesEachOnceWithoutStall(t *testing.T) {
	testenv.SkipUnderRace(t, "its rounds wait past the acknowledgement deadline and publish again")
	ctx := context.Background()
	e := setup(t) // its JetStream context is the planner's, for the default concurrency and batch
	const n = 20_000
	at := time.Now().Add(2 * time.Second).Truncate(time.Second)
	def := blob(t, `{"startTime":"2026-03-01T12:00:00Z",`+action+`}`)
	for i := range n {
		c := fmt.Sprint("c", i%50) // many collections: every partition has work
		if i < 50 {
			if _, _, err := e.svc.PutCollection(ctx, c, []byte(`{"properties":{}}`), false); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, _, err := e.store.PutJob(ctx, store.PutJob{Collection: c, Name: fmt.Sprint("j", i), Definition: def,
			Accepted: at, Next: at, State: job.StateEnabled, Reaccept: true}); err != nil {
			t.Fatal(err)
		}
	}
	m := &stageCounter{}
	// The planner's default lookahead: every partition has its batch ready and sends it the
	// moment the burst is due.
	e.startPlanner("p1", m, func(c *dispatch.Config) { c.Lookahead = 250 * time.Millisecond })
	testenv.Eventually(t, 60*time.Second, "20,000 publishes", func() bool { return m.published.Load() >= n },
		func() string { return fmt.Sprint(m.published.Load(), " published, errors ", m.errors()) })
	if errs := m.errors(); len(errs) != 0 {
		t.Fatalf("errors during the burst: %v (a stalled publish shows as publish)", errs)
	}
	info, err := e.js.Stream(ctx, e.subj.DueStream())
	if err != nil {
		t.Fatal(err)
	}
	if msgs := info.CachedInfo().State.Msgs; msgs != n || m.published.Load() != n {
		t.Fatalf("due stream holds %d messages and %d were published, want %d each", msgs, m.published.Load(), n)
	}
}

// Three planners against one Redis and 10,000 due occurrences: each is published exactly once
// (counted at the publishers, so JetStream's de-duplication cannot hide a double publish).
func TestLoopThreePlannersPublishEachOccurrenceOnce(t *testing.T) {
	testenv.SkipUnderRace(t, "its rounds wait past the acknowledgement deadline and publish again")
	ctx := context.Background()
	e := setup(t)
	const n = 10_000
	at := time.Now().Add(time.Second)
	def := blob(t, `{"startTime":"2026-03-01T12:00:00Z",`+action+`}`)
	for i := range n {
		c := fmt.Sprint("c", i%50)
		if i < 50 {
			if _, _, err := e.svc.PutCollection(ctx, c, []byte(`{"properties":{}}`), false); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, _, err := e.store.PutJob(ctx, store.PutJob{Collection: c, Name: fmt.Sprint("j", i), Definition: def,
			Accepted: at, Next: at, State: job.StateEnabled, Reaccept: true}); err != nil {
			t.Fatal(err)
		}
	}
	var count counter
	for i := range 3 {
		e.startPlanner(fmt.Sprint("p", i), &count)
	}
	testenv.Eventually(t, 60*time.Second, "10,000 publishes", func() bool { return count.published.Load() >= n })
	testenv.Eventually(t, 10*time.Second, "every job advanced", func() bool {
		backlog, err := e.store.DueBacklog(ctx, time.Now().Add(time.Hour))
		return err == nil && backlog == 0
	})
	if got := count.published.Load(); got != n {
		t.Fatalf("published %d times for %d occurrences", got, n)
	}
}

// A planner killed outright (its leases neither renewed nor given up) costs seconds, not a
// lease of old: the other planner takes its partitions over once the leases run out, and every
// occurrence of jobs firing every second is published, once, none skipped, none early, none
// later than a few seconds.
func TestLoopKilledPlannerCostsSeconds(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	e.useRealClock()
	ds := e.watchDue()
	start := time.Now().Add(time.Second).Truncate(time.Second)
	const jobCount = 40
	for i := range jobCount {
		c := fmt.Sprint("c", i%20) // spread over the partitions both planners hold
		if _, _, err := e.svc.PutCollection(ctx, c, []byte(`{"properties":{}}`), false); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.svc.PutJob(ctx, c, fmt.Sprint("j", i), []byte(`{"startTime":"`+start.Format(time.RFC3339)+`",`+action+
			`,"recurrence":{"frequency":"Second"}}`), false); err != nil {
			t.Fatal(err)
		}
	}
	a := e.startPlanner("a", nil)
	e.startPlanner("b", nil)
	testenv.Eventually(t, 10*time.Second, "both planners to hold partitions", func() bool {
		return len(a.leases.Held()) > 0 && len(a.leases.Held()) < e.store.Partitions()
	})
	time.Sleep(2 * time.Second) // the jobs fire on the real clock meanwhile
	killed := time.Now()
	a.stop(false)
	time.Sleep(5 * time.Second)
	end := time.Now().Add(-time.Second).Truncate(time.Second) // occurrences due by then must be out
	testenv.Eventually(t, 10*time.Second, "the occurrences up to the end", func() bool {
		for _, r := range ds.all() {
			if !r.due.Scheduled.Before(end) {
				return true
			}
		}
		return false
	})
	seen := map[string]int{}
	var worst time.Duration
	for _, r := range ds.all() {
		if r.due.Scheduled.After(end) {
			continue
		}
		seen[fmt.Sprint(r.due.Collection, "/", r.due.Job, "@", r.due.Scheduled.Unix())]++
		if late := r.stored.Sub(r.due.Scheduled); late > worst {
			worst = late
		} else if late < 0 {
			t.Errorf("%s/%s published %v early", r.due.Collection, r.due.Job, -late)
		}
	}
	for i := range jobCount {
		for s := start; !s.After(end); s = s.Add(time.Second) {
			if k := fmt.Sprint(fmt.Sprint("c", i%20), "/", fmt.Sprint("j", i), "@", s.Unix()); seen[k] != 1 {
				t.Errorf("%s published %d times (planner killed at %s)", k, seen[k], killed.Format(time.StampMilli))
			}
		}
		h, _ := e.store.History(ctx, fmt.Sprint("c", i%20), fmt.Sprint("j", i), time.Now())
		for _, entry := range h {
			if entry.Status == job.ExecutionSkipped {
				t.Errorf("j%d: skipped while a planner ran: %s", i, entry.Message)
			}
		}
	}
	if worst > 4*loopLease {
		t.Errorf("an occurrence was published %v late; the lease is %v", worst, loopLease)
	}
	t.Logf("latest publish after the kill: %v late", worst)
}

// stageCounter counts publishes and errors by stage.
type stageCounter struct {
	counter
	mu   sync.Mutex
	errs map[string]int
}

func (s *stageCounter) Error(stage string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errs == nil {
		s.errs = map[string]int{}
	}
	s.errs[stage]++
}

func (s *stageCounter) errors() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs
}

// The JetStream context the planner publishes with allows every publish the dispatcher may have
// in flight (Concurrency batches of Batch messages) even when no acknowledgement has come back
// yet: past nats.go's limit a publish stalls for 200 ms and then fails, and under load a burst
// would fire late. The subject here has a listener that never answers, so nothing is acked.
func TestJetStreamOptionsAllowEveryPublishInFlight(t *testing.T) {
	ns := natstest.Start(t)
	nc := ns.Connect(t)
	if _, err := nc.Subscribe("silent.>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ concurrency, batch int }{{0, 0}, {16, 256}, {64, 512}} {
		js, err := jetstream.New(nc, dispatch.JetStreamOptions(c.concurrency, c.batch)...)
		if err != nil {
			t.Fatal(err)
		}
		inFlight := max(c.concurrency, 16) * max(c.batch, 256)
		for i := range inFlight {
			if _, err := js.PublishMsgAsync(&nats.Msg{Subject: fmt.Sprint("silent.", i), Data: []byte("x")}); err != nil {
				t.Fatalf("concurrency %d, batch %d: publish %d of %d in flight failed: %v", c.concurrency, c.batch, i+1, inFlight, err)
			}
		}
	}
}

// What fell due while no planner ran goes once the outage settles, not up to MaxIdle later:
// the partition had nothing else due, so its loop slept MaxIdle after the round that held the
// job back.
func TestLoopOutageJobsGoOnceTheOutageSettles(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	e.useRealClock()
	ds := e.watchDue()
	now := time.Now()
	// The last heartbeat of a planner gone 10 s ago: the next planner records an outage.
	if _, err := e.store.Heartbeat(ctx, "gone", now.Add(-10*time.Second), now.Add(-9*time.Second), now.Add(-time.Hour),
		time.Time{}, loopLease/3, 10); err != nil {
		t.Fatal(err)
	}
	e.put("missed", `{"startTime":"`+now.Add(-5*time.Second).UTC().Format(time.RFC3339)+`",`+action+`}`)
	pp := e.startPlanner("b", nil, func(c *dispatch.Config) { c.MaxIdle = time.Minute })
	testenv.Eventually(t, 10*time.Second, "the missed job published", func() bool { return len(ds.all()) == 1 })
	outages := pp.leases.Outages()
	if len(outages) != 1 {
		t.Fatalf("outages on record %v, want the one the planner recorded", outages)
	}
	settled := outages[0].Recorded.Add(3 * pp.leases.Period())
	if got := ds.all()[0]; got.due.Job != "missed" || got.stored.Before(settled) {
		t.Fatalf("published %s at %s, want missed once the outage settled (%s)", got.due.Job,
			got.stored.Format(time.StampMilli), settled.Format(time.StampMilli))
	}
}
