package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/services/internal/natstest"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/services/planner/internal/dispatch"
	"github.com/resched/resched/shared/job"
)

// gatedJS publishes through the real JetStream but hands the dispatcher each acknowledgement
// only once the test opens the gate, so a test sees what the dispatcher sends before it has
// any acknowledgement.
type gatedJS struct {
	jetstream.JetStream
	gate chan struct{} // closed: acknowledgements pass

	mu   sync.Mutex
	sent int
}

func (g *gatedJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f, err := g.JetStream.PublishMsgAsync(m, opts...)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.sent++
	g.mu.Unlock()
	return &gatedAck{PubAckFuture: f, gate: g.gate}, nil
}

func (g *gatedJS) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sent
}

type gatedAck struct {
	jetstream.PubAckFuture
	gate chan struct{}
}

func (a *gatedAck) Ok() <-chan *jetstream.PubAck {
	out := make(chan *jetstream.PubAck, 1)
	go func() {
		<-a.gate
		out <- <-a.PubAckFuture.Ok()
	}()
	return out
}

// A round publishes all its batches before it waits for the first one's acknowledgements:
// 5,000 jobs due at one second once went out a batch per round trip, over a quarter second.
// Here 5 batches of 10 are all sent while no acknowledgement has come, and once they come
// every job is advanced, a batch at a time.
func TestRoundSendsEveryBatchBeforeTheAcknowledgements(t *testing.T) {
	e := setup(t)
	const jobs = 50
	for i := range jobs {
		e.put(fmt.Sprint("j", i), `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Hour"}}`)
	}
	js := &gatedJS{JetStream: e.js, gate: make(chan struct{})}
	d := dispatch.New(dispatch.Config{Store: e.store, JS: js, Leases: e.leases, Subjects: e.subj, Clock: e.clock.now,
		Batch: 10, MaxIdle: 5 * time.Millisecond})
	open := sync.OnceFunc(func() { close(js.gate) })
	t.Cleanup(open) // a failed test lets the round end
	done := make(chan int, 1)
	go func() {
		n, err := d.DispatchOnce(context.Background())
		if err != nil {
			t.Error(err)
		}
		done <- n
	}()
	testenv.Eventually(t, 10*time.Second, "every batch sent before any acknowledgement", func() bool {
		return js.count() == jobs
	}, func() string { return fmt.Sprintf("%d of %d sent", js.count(), jobs) })
	open()
	if n := <-done; n != jobs {
		t.Fatalf("published %d, want %d", n, jobs)
	}
	if got := e.drain(); len(got) != jobs {
		t.Fatalf("%d occurrences on the due stream, want %d", len(got), jobs)
	}
	for i := range jobs {
		rec, err := e.store.GetJob(context.Background(), "c", fmt.Sprint("j", i))
		if err != nil || !rec.Next.Equal(t0.Add(time.Hour)) {
			t.Fatalf("j%d not advanced: next %v (%v)", i, rec.Next, err)
		}
	}
}

// failSecondLoad fails the second pipeline that reads jobs' state (HMGET), as a Redis that
// goes away in the middle of a round would.
type failSecondLoad struct{ loads atomic.Int32 }

func (*failSecondLoad) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*failSecondLoad) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (f *failSecondLoad) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "hmget" }) && f.loads.Add(1) == 2 {
			return errors.New("injected: connection reset")
		}
		return next(ctx, cmds)
	}
}

// A read that fails in the middle of a round ends the reading: the batches read before it
// are published and advanced, the rest stay due, untouched, and the next round fires each of
// them once.
func TestRoundAReadFailingMidwayKeepsTheRestDue(t *testing.T) {
	e := setup(t)
	const jobs = 50
	for i := range jobs {
		e.put(fmt.Sprint("j", i), `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Hour"}}`)
	}
	fail := &failSecondLoad{}
	e.redisClient.AddHook(fail)
	d := dispatch.New(dispatch.Config{Store: e.store, JS: e.js, Leases: e.leases, Subjects: e.subj, Clock: e.clock.now,
		Batch: 10, MaxIdle: 5 * time.Millisecond})
	n, err := d.DispatchOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("round with a failed read: error %v, want the injected one", err)
	}
	if n != 10 {
		t.Fatalf("published %d before the failed read, want the first batch of 10", n)
	}
	advanced := 0
	for i := range jobs {
		rec, err := e.store.GetJob(context.Background(), "c", fmt.Sprint("j", i))
		if err != nil {
			t.Fatal(err)
		}
		if rec.Next.Equal(t0.Add(time.Hour)) {
			advanced++
		} else if !rec.Next.Equal(t0) {
			t.Fatalf("j%d: next %v, want %v or %v", i, rec.Next, t0, t0.Add(time.Hour))
		}
	}
	if advanced != 10 {
		t.Fatalf("%d jobs advanced, want the 10 published", advanced)
	}
	if n, err := d.DispatchOnce(context.Background()); err != nil || n != jobs-10 {
		t.Fatalf("the next round published %d (%v), want the %d left due", n, err, jobs-10)
	}
	seen := map[string]int{}
	for _, due := range e.drain() {
		seen[due.Job]++
	}
	for i := range jobs {
		if c := seen[fmt.Sprint("j", i)]; c != 1 {
			t.Fatalf("j%d on the due stream %d times, want once (%d jobs seen)", i, c, len(seen))
		}
	}
}

// failingJS refuses every publish to one subject, as a stream that cannot take it would,
// with an error that is not the message's own fault: the dispatcher sends it again.
type failingJS struct {
	jetstream.JetStream
	subject string
}

func (f *failingJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if m.Subject == f.subject {
		return nil, errors.New("injected: no stream leader")
	}
	return f.JetStream.PublishMsgAsync(m, opts...)
}

// A publish that keeps failing in a round's first batch does not hold back the batches after
// it: they were sent already, and are advanced in the same round without retries of their
// own. Only the failing job stays due, and the next round fires it once.
func TestRoundOneFailingPublishLetsTheLaterBatchesAdvance(t *testing.T) {
	e := setup(t)
	const jobs = 50
	for i := range jobs {
		e.put(fmt.Sprintf("j%02d", i), `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Hour"}}`)
	}
	js := &failingJS{JetStream: e.js, subject: e.subj.Due("c", "j03")}
	m := &stageCounter{}
	d := dispatch.New(dispatch.Config{Store: e.store, JS: js, Leases: e.leases, Subjects: e.subj, Clock: e.clock.now,
		Metrics: m, Batch: 10, MaxIdle: 5 * time.Millisecond, PublishRetries: 1})
	n, err := d.DispatchOnce(context.Background())
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("round with a failing publish: error %v, want the injected one", err)
	}
	if n != jobs-1 {
		t.Fatalf("published %d, want every job but the failing one (%d)", n, jobs-1)
	}
	if r := m.errors()["publish_retry"]; r != 2 {
		t.Fatalf("%d failed publishes, want 2: the failing one sent twice, nothing else again", r)
	}
	for i := range jobs {
		name, want := fmt.Sprintf("j%02d", i), t0.Add(time.Hour)
		if name == "j03" {
			want = t0
		}
		rec, err := e.store.GetJob(context.Background(), "c", name)
		if err != nil || !rec.Next.Equal(want) {
			t.Fatalf("%s: next %v (%v), want %v", name, rec.Next, err, want)
		}
	}
	healthy := dispatch.New(dispatch.Config{Store: e.store, JS: e.js, Leases: e.leases, Subjects: e.subj, Clock: e.clock.now,
		Batch: 10, MaxIdle: 5 * time.Millisecond})
	if n, err := healthy.DispatchOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("the next round published %d (%v), want the one left due", n, err)
	}
	seen := map[string]int{}
	for _, due := range e.drain() {
		seen[due.Job]++
	}
	for i := range jobs {
		if c := seen[fmt.Sprintf("j%02d", i)]; c != 1 {
			t.Fatalf("j%02d on the due stream %d times, want once", i, c)
		}
	}
}

// An occurrence the due stream refuses for good (an operator set its largest message below
// what a definition may hold) parks its job Faulted with a history entry saying why, at once
// and without retries, and the round goes on as if it were not there: sent again at every
// round, it would fail at every round and hold its partition back. Put again small enough,
// the job runs.
func TestOccurrenceRefusedForGoodParksItsJob(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	natstest.SetMaxMsgSize(t, e.js, e.subj.DueStream(), 2048)
	const jobs = 30
	for i := range jobs {
		e.put(fmt.Sprintf("j%02d", i), `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Hour"}}`)
	}
	big := `{"startTime":"2026-03-01T12:00:00Z","action":{"type":"Http","request":{"method":"POST","uri":"http://localhost:9/x","body":"` +
		strings.Repeat("x", 4096) + `"}},"recurrence":{"frequency":"Hour"}}`
	e.put("j04big", big)
	m := &stageCounter{}
	d := dispatch.New(dispatch.Config{Store: e.store, JS: e.js, Leases: e.leases, Subjects: e.subj, Clock: e.clock.now,
		Metrics: m, Batch: 10, MaxIdle: 5 * time.Millisecond})
	if n, err := d.DispatchOnce(ctx); err != nil || n != jobs {
		t.Fatalf("round: published %d (%v), want the %d small jobs and no error", n, err, jobs)
	}
	if errs := m.errors(); errs["refused"] != 1 || errs["publish_retry"] != 0 {
		t.Fatalf("errors by stage %v, want one refused and no retry", errs)
	}
	for i := range jobs {
		if rec, err := e.store.GetJob(ctx, "c", fmt.Sprintf("j%02d", i)); err != nil || !rec.Next.Equal(t0.Add(time.Hour)) {
			t.Fatalf("j%02d not advanced: %+v (%v)", i, rec, err)
		}
	}
	rec, err := e.store.GetJob(ctx, "c", "j04big")
	if err != nil {
		t.Fatal(err)
	}
	h, _ := e.store.History(ctx, "c", "j04big", e.clock.now())
	if rec.State != job.StateFaulted || rec.Occurrence != 0 || len(h) != 1 ||
		!strings.Contains(h[0].Message, "refuses this occurrence") || !strings.Contains(h[0].Message, "exceeds maximum") {
		t.Fatalf("state %s, %d occurrences, history %+v; want Faulted, none, one entry saying why", rec.State, rec.Occurrence, h)
	}
	if got := e.drain(); len(got) != jobs {
		t.Fatalf("%d occurrences on the due stream, want %d", len(got), jobs)
	}
	e.put("j04big", `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Hour"}}`)
	if n, err := d.DispatchOnce(ctx); err != nil || n != 1 {
		t.Fatalf("after the put: published %d (%v), want the job put again", n, err)
	}
}

// unansweredJS loses the first send of each message to some subjects without an error, as a
// stream leader that hangs does: the publish goes out and no acknowledgement ever comes. Later
// sends go through.
type unansweredJS struct {
	jetstream.JetStream
	lose map[string]bool

	mu   sync.Mutex
	sent map[string]int
}

func (u *unansweredJS) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	u.mu.Lock()
	u.sent[m.Subject]++
	first := u.sent[m.Subject] == 1
	u.mu.Unlock()
	if first && u.lose[m.Subject] {
		return neverAck{msg: m}, nil
	}
	return u.JetStream.PublishMsgAsync(m, opts...)
}

func (u *unansweredJS) sends(subject string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sent[subject]
}

// neverAck is the future of a publish nobody answers.
type neverAck struct{ msg *nats.Msg }

func (neverAck) Ok() <-chan *jetstream.PubAck { return nil }
func (neverAck) Err() <-chan error            { return nil }
func (a neverAck) Msg() *nats.Msg             { return a.msg }

// Publishes that are never acknowledged are taken as failed once the round has heard no
// acknowledgement for a while, and sent again under their ids; the round then ends with every
// job advanced. They had no deadline but the batch's: with the due stream's leader paused, no
// job fired for 30 s (TestNATSClusterStreamLeaderHangs, services/chaos). The messages that
// were acknowledged are not sent again, and the round waits once, not once a batch (a round of
// 32 batches sent to a hung leader took a minute).
func TestRoundSendsAgainWhatIsNeverAcknowledged(t *testing.T) {
	e := setup(t)
	const jobs = 30
	for i := range jobs {
		e.put(fmt.Sprintf("j%02d", i), `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Hour"}}`)
	}
	lost := []string{"j02", "j15", "j29"} // in the first, second and third batch
	js := &unansweredJS{JetStream: e.js, lose: map[string]bool{}, sent: map[string]int{}}
	for _, name := range lost {
		js.lose[e.subj.Due("c", name)] = true
	}
	m := &stageCounter{}
	d := dispatch.New(dispatch.Config{Store: e.store, JS: js, Leases: e.leases, Subjects: e.subj, Clock: e.clock.now,
		Metrics: m, Batch: 10, MaxIdle: 5 * time.Millisecond})
	if n, err := d.DispatchOnce(context.Background()); err != nil || n != jobs {
		t.Fatalf("round: published %d (%v), want all %d and no error", n, err, jobs)
	}
	if r := m.errors()["publish_retry"]; r != len(lost) {
		t.Fatalf("%d publishes taken as failed, want the %d never acknowledged", r, len(lost))
	}
	// One wait for the round: its later batches were sent with the first and had their time.
	if s := m.errors()["ack_stall"]; s != 1 {
		t.Fatalf("the round waited out %d stalls, want 1", s)
	}
	seen := map[string]int{}
	for _, due := range e.drain() {
		seen[due.Job]++
	}
	for i := range jobs {
		name, want := fmt.Sprintf("j%02d", i), 1
		if slices.Contains(lost, name) {
			want = 2
		}
		if c := seen[name]; c != 1 {
			t.Fatalf("%s on the due stream %d times, want once", name, c)
		}
		if s := js.sends(e.subj.Due("c", name)); s != want {
			t.Fatalf("%s sent %d times, want %d", name, s, want)
		}
		if rec, err := e.store.GetJob(context.Background(), "c", name); err != nil || !rec.Next.Equal(t0.Add(time.Hour)) {
			t.Fatalf("%s not advanced: next %v (%v)", name, rec.Next, err)
		}
	}
}

// deadlineHook records, for each Redis command, the longest time any call of it had left
// before its deadline (an hour when it had none).
type deadlineHook struct {
	mu      sync.Mutex
	longest map[string]time.Duration
}

func (*deadlineHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *deadlineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(ctx, cmd)
		return next(ctx, cmd)
	}
}

func (h *deadlineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.note(ctx, c)
		}
		return next(ctx, cmds)
	}
}

func (h *deadlineHook) note(ctx context.Context, cmd redis.Cmder) {
	left := time.Hour
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.longest[cmd.Name()] = max(h.longest[cmd.Name()], left)
}

// Every Redis call of a round (the claim, the reads, the advance) has CallTimeout at most: a
// second by default; the planner gives it a third of its lease, as the lease renewal has.
// Under the batch's deadline alone, a claim sent to a Redis master that hung held its
// partition about 10 s after a replica had taken over (TestRedisClusterMasterHangs,
// services/chaos). A call that fails is made again by the next round.
func TestRoundGivesEachRedisCallASecond(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration // dispatch.Config.CallTimeout
		want    time.Duration
	}{
		{"default", 0, time.Second},
		{"a third of a 9s lease", 3 * time.Second, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			for i := range 30 {
				e.put(fmt.Sprint("j", i), `{"startTime":"2026-03-01T12:00:00Z",`+action+`,"recurrence":{"frequency":"Hour"}}`)
			}
			h := &deadlineHook{longest: map[string]time.Duration{}}
			e.redisClient.AddHook(h)
			d := dispatch.New(dispatch.Config{Store: e.store, JS: e.js, Leases: e.leases, Subjects: e.subj, Clock: e.clock.now,
				Batch: 10, MaxIdle: 5 * time.Millisecond, CallTimeout: tc.timeout})
			if n, err := d.DispatchOnce(context.Background()); err != nil || n != 30 {
				t.Fatalf("round: published %d (%v), want 30", n, err)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if len(h.longest) == 0 {
				t.Fatal("no Redis call seen")
			}
			var most time.Duration
			for name, left := range h.longest {
				if left > tc.want {
					t.Errorf("%s had %v before its deadline, want %v at most", name, left.Round(time.Millisecond), tc.want)
				}
				most = max(most, left)
			}
			// The calls take milliseconds: a deadline far below the setting is not the setting.
			if most < tc.want-tc.want/4 {
				t.Errorf("the longest deadline was %v, want about %v", most.Round(time.Millisecond), tc.want)
			}
			t.Logf("calls: %v", h.longest)
		})
	}
}
