package consumer

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/testenv"
	"github.com/resched/resched/shared/job"
)

// These tests hold the stream's acknowledgements in their hands, so what goes together does
// not depend on how fast the machine is (the integration tests in consumer_test.go check the
// same reporter against a real stream, for correctness only).

const within = 20 * time.Second

// heldAcks is a publisher whose acknowledgements come when the test says so.
type heldAcks struct {
	mu      sync.Mutex
	sent    []*nats.Msg
	pending []*heldAck
	fail    bool  // acknowledge with an error rather than a PubAck
	failErr error // that error; "stream unavailable" when nil
}

type heldAck struct {
	msg *nats.Msg
	ok  chan *jetstream.PubAck
	err chan error
}

func (a *heldAck) Ok() <-chan *jetstream.PubAck { return a.ok }
func (a *heldAck) Err() <-chan error            { return a.err }
func (a *heldAck) Msg() *nats.Msg               { return a.msg }

func (h *heldAcks) PublishMsgAsync(m *nats.Msg, _ ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := &heldAck{msg: m, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	h.sent = append(h.sent, m)
	h.pending = append(h.pending, a)
	return a, nil
}

// release acknowledges every message published so far.
func (h *heldAcks) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.pending {
		if h.fail {
			a.err <- cmp.Or(h.failErr, errors.New("stream unavailable"))
		} else {
			a.ok <- &jetstream.PubAck{}
		}
	}
	h.pending = nil
}

func (h *heldAcks) published() []*nats.Msg {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*nats.Msg(nil), h.sent...)
}

func startReporter(t *testing.T, h *heldAcks, retry func(*nats.Msg) error) *reporter {
	t.Helper()
	return startLingering(t, h, 0, retry)
}

func startLingering(t *testing.T, h *heldAcks, linger time.Duration, retry func(*nats.Msg) error) *reporter {
	t.Helper()
	p := newReporter(h, bus.Subjects{Prefix: "scheduler"}, waits{linger: linger}, within, retry)
	go p.run()
	t.Cleanup(func() {
		h.release()
		select {
		case <-p.done: // the test closed it
		default:
			p.close()
		}
	})
	return p
}

// sendAll hands results over from one goroutine each and returns their outcomes' channel.
func sendAll(p *reporter, rs []bus.Result) <-chan error {
	out := make(chan error, len(rs))
	for _, r := range rs {
		go p.hand(r, func(err error) { out <- err })
	}
	return out
}

func result(collection string, i int) bus.Result {
	return bus.Result{Collection: collection, Job: fmt.Sprint("j", i), ExecutionTag: fmt.Sprint("tag-", i),
		ActionName: job.ActionNameMain, Status: job.ExecutionCompleted, Final: true, MainDone: true}
}

// While the window is full of batches awaiting their acknowledgement, the results that end
// gather, and go as one message per collection once a slot frees.
func TestResultsGatherWhileTheWindowIsFull(t *testing.T) {
	h := &heldAcks{}
	p := startReporter(t, h, func(*nats.Msg) error { t.Error("no publish should be retried"); return nil })

	var first []<-chan error
	for i := range reportWindow {
		first = append(first, sendAll(p, []bus.Result{result("c", i)}))
		testenv.Eventually(t, within, "the result to be published alone", func() bool { return len(h.published()) == i+1 })
	}
	var rest []bus.Result
	for i := range 40 {
		rest = append(rest, result([]string{"c", "d"}[i%2], 100+i))
	}
	gathered := sendAll(p, rest)
	// run has taken the first of them and waits for a slot; the others queue behind it.
	testenv.Eventually(t, within, "the 40 results to wait for a slot", func() bool { return len(p.in) == len(rest)-1 })

	h.release()
	for _, c := range first {
		if err := <-c; err != nil {
			t.Fatalf("result published alone: %v", err)
		}
	}
	testenv.Eventually(t, within, "the gathered results to be published", func() bool { return len(h.published()) == reportWindow+2 })
	h.release()
	for range rest {
		if err := <-gathered; err != nil {
			t.Fatalf("gathered result: %v", err)
		}
	}

	msgs := h.published()
	for i, m := range msgs[:reportWindow] {
		if want := "scheduler.results.c." + fmt.Sprint("j", i); m.Subject != want {
			t.Errorf("message %d on %s, want %s (a result alone goes on its job's subject)", i, m.Subject, want)
		}
	}
	per := map[string]int{}
	for _, m := range msgs[reportWindow:] {
		rs, err := bus.DecodeResults(m.Data)
		if err != nil {
			t.Fatalf("batch on %s: %v", m.Subject, err)
		}
		for _, r := range rs {
			if m.Subject != "scheduler.results."+r.Collection {
				t.Errorf("result of collection %s in the batch on %s", r.Collection, m.Subject)
			}
			per[r.ExecutionTag]++
		}
		if m.Header.Get(bus.HeaderMsgID) != bus.ResultsMsgID(rs) {
			t.Errorf("batch on %s has message id %q, want %q", m.Subject, m.Header.Get(bus.HeaderMsgID), bus.ResultsMsgID(rs))
		}
	}
	for _, r := range rest {
		if per[r.ExecutionTag] != 1 {
			t.Errorf("result %s is in %d batches, want 1", r.ExecutionTag, per[r.ExecutionTag])
		}
	}
}

// A batch the stream refuses is published again the slow way, and each of its deliveries
// learns that outcome.
func TestRefusedBatchIsRetriedAndItsDeliveriesTold(t *testing.T) {
	h := &heldAcks{fail: true}
	retried := make(chan *nats.Msg, 8)
	slow := errors.New("slow publish failed too")
	p := startReporter(t, h, func(m *nats.Msg) error { retried <- m; return slow })

	out := sendAll(p, []bus.Result{result("c", 1)})
	testenv.Eventually(t, within, "the result to be published", func() bool { return len(h.published()) == 1 })
	h.release()
	if err := <-out; !errors.Is(err, slow) {
		t.Fatalf("delivery told %v, want the slow publish's error", err)
	}
	if m := <-retried; m != h.published()[0] {
		t.Errorf("retried %s, want the refused message", m.Subject)
	}
}

// A message the stream refuses for its size (an operator's limit below maxReportBytes) is
// not sent again whole, which would fail every time: its results are published one to a
// message, and the next batch goes in messages half its size.
func TestBatchTooLargeGoesApartAndLaterOnesSmaller(t *testing.T) {
	h := &heldAcks{fail: true, failErr: &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}}
	var mu sync.Mutex
	var alone []*nats.Msg
	p := startLingering(t, h, time.Hour, func(m *nats.Msg) error {
		mu.Lock()
		defer mu.Unlock()
		alone = append(alone, m)
		return nil
	})
	batch := func(from int) []bus.Result { // one full batch: it goes at once, in one message
		rs := make([]bus.Result, maxReportBatch)
		for i := range rs {
			rs[i] = result("c", from+i)
		}
		return rs
	}
	out := sendAll(p, batch(0))
	testenv.Eventually(t, within, "the full batch published", func() bool { return len(h.published()) == 1 })
	h.release()
	for range maxReportBatch {
		if err := <-out; err != nil {
			t.Fatalf("a delivery was told %v, want its result stored", err)
		}
	}
	mu.Lock()
	for _, m := range alone {
		if !strings.HasPrefix(m.Subject, "scheduler.results.c.j") || m.Header.Get(bus.HeaderMsgID) == "" {
			t.Fatalf("published alone on %s: want a result on its job's subject, with its id", m.Subject)
		}
	}
	if len(alone) != maxReportBatch {
		t.Fatalf("%d results published alone, want the %d of the refused message", len(alone), maxReportBatch)
	}
	mu.Unlock()

	h.mu.Lock()
	h.fail = false
	h.mu.Unlock()
	out = sendAll(p, batch(maxReportBatch))
	stored := 0
	testenv.Eventually(t, within, "the next batch stored", func() bool {
		h.release()
		for {
			select {
			case err := <-out:
				if err != nil {
					t.Error(err)
				}
				stored++
			default:
				return stored == maxReportBatch
			}
		}
	}, func() string { return fmt.Sprintf("%d of %d stored", stored, maxReportBatch) })
	if got := len(h.published()) - 1; got != 2 {
		t.Fatalf("the next batch went in %d messages, want 2 (half the size refused)", got)
	}
}

// A result refused for its size even alone (a limit below a result: a target's large answer)
// is published with its message cut, and its delivery told it is stored.
func TestResultTooLargeAloneGoesCut(t *testing.T) {
	tooLarge := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}
	h := &heldAcks{fail: true, failErr: tooLarge}
	stored := make(chan *nats.Msg, 4)
	p := startReporter(t, h, func(m *nats.Msg) error {
		if len(m.Data) > 2048 {
			return tooLarge
		}
		stored <- m
		return nil
	})
	r := result("c", 1)
	r.Message = strings.Repeat("é", 3000) // 6,000 bytes
	out := sendAll(p, []bus.Result{r})
	testenv.Eventually(t, within, "the result published", func() bool { return len(h.published()) == 1 })
	h.release()
	if err := <-out; err != nil {
		t.Fatalf("delivery told %v, want its result stored", err)
	}
	got, err := bus.DecodeResult((<-stored).Data)
	if err != nil {
		t.Fatal(err)
	}
	if got.ExecutionTag != r.ExecutionTag || !strings.HasPrefix(got.Message, "éé") || !strings.HasSuffix(got.Message, cutNote) ||
		len(got.Message) > cutMessage+len(cutNote) {
		t.Fatalf("stored %s with a message of %d bytes ending %q; want it cut to %d and saying so",
			got.ExecutionTag, len(got.Message), got.Message[max(len(got.Message)-60, 0):], cutMessage)
	}
}

// With a linger, results wait for others though the window is free: a batch goes once it is
// full, or at the end of the linger (here an hour, so only a full batch or a close sends one).
func TestLingeringResultsGoTogether(t *testing.T) {
	h := &heldAcks{}
	p := startLingering(t, h, time.Hour, func(*nats.Msg) error { t.Error("no publish should be retried"); return nil })
	full := make([]bus.Result, maxReportBatch)
	for i := range full {
		full[i] = result("c", i)
	}
	out := sendAll(p, full)
	testenv.Eventually(t, within, "the full batch to be published", func() bool { return len(h.published()) == 1 })
	h.release()
	for range full {
		if err := <-out; err != nil {
			t.Fatal(err)
		}
	}
	if rs, err := bus.DecodeResults(h.published()[0].Data); err != nil || len(rs) != maxReportBatch {
		t.Fatalf("the batch holds %d results (%v), want %d", len(rs), err, maxReportBatch)
	}

	last := make(chan error, 2)
	for i := range 2 {
		p.hand(result("c", 1000+i), func(err error) { last <- err })
	}
	testenv.Eventually(t, within, "the two results to be taken into a batch", func() bool { return len(p.in) == 0 })
	if n := len(h.published()); n != 1 {
		t.Fatalf("%d messages published while two results linger, want 1", n)
	}
	closed := make(chan struct{})
	go func() { p.close(); close(closed) }()
	testenv.Eventually(t, within, "close to send the lingering batch", func() bool { return len(h.published()) == 2 })
	h.release()
	<-closed
	for range 2 {
		if err := <-last; err != nil {
			t.Fatal(err)
		}
	}
}

// busyWorker is a worker's quiet for the reporter: busy (0) until the test says otherwise,
// counting how often the reporter looked.
type busyWorker struct {
	mu    sync.Mutex
	idle  bool
	looks int
}

func (b *busyWorker) quiet() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.looks++
	if b.idle {
		return time.Hour
	}
	return 0
}

func (b *busyWorker) looked() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.looks
}

func (b *busyWorker) rest() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.idle = true
}

func startWaiting(t *testing.T, h *heldAcks, w waits) *reporter {
	t.Helper()
	p := newReporter(h, bus.Subjects{Prefix: "scheduler"}, w, within, func(*nats.Msg) error {
		t.Error("no publish should be retried")
		return nil
	})
	go p.run()
	t.Cleanup(func() {
		h.release()
		p.close()
	})
	return p
}

// While the worker is delivering, results wait past the linger and past a full batch, so that
// recording them does not take the CPU the deliveries need; once it is quiet they go.
func TestResultsWaitWhileTheWorkerDelivers(t *testing.T) {
	h, busy := &heldAcks{}, &busyWorker{}
	p := startWaiting(t, h, waits{linger: time.Nanosecond, most: time.Hour, held: 1000, quiet: busy.quiet})
	rs := make([]bus.Result, maxReportBatch+44)
	for i := range rs {
		rs[i] = result("c", i)
	}
	out := sendAll(p, rs)
	testenv.Eventually(t, within, "every result taken and the worker looked at after the linger", func() bool {
		return len(p.in) == 0 && busy.looked() > 3
	})
	if n := len(h.published()); n != 0 {
		t.Fatalf("%d messages published while the worker delivers, want none", n)
	}
	busy.rest()
	testenv.Eventually(t, within, "the results to go once the worker is quiet", func() bool { return len(h.published()) == 2 })
	h.release()
	for range rs {
		if err := <-out; err != nil {
			t.Fatal(err)
		}
	}
}

// A busy worker's results go at the longest wait, or once it holds as many as it may.
func TestResultsWaitNoLongerThanAllowed(t *testing.T) {
	h, busy := &heldAcks{}, &busyWorker{}
	p := startWaiting(t, h, waits{linger: time.Nanosecond, most: time.Millisecond, held: 1000, quiet: busy.quiet})
	out := sendAll(p, []bus.Result{result("c", 1)})
	testenv.Eventually(t, within, "the result to go at the longest wait", func() bool { return len(h.published()) == 1 })
	h.release()
	if err := <-out; err != nil {
		t.Fatal(err)
	}

	h2 := &heldAcks{}
	p2 := startWaiting(t, h2, waits{linger: time.Hour, most: time.Hour, held: 300, quiet: busy.quiet})
	rs := make([]bus.Result, 300)
	for i := range rs {
		rs[i] = result("c", i)
	}
	out = sendAll(p2, rs)
	testenv.Eventually(t, within, "the results to go once as many are held as allowed", func() bool { return len(h2.published()) == 2 })
	h2.release()
	for range rs {
		if err := <-out; err != nil {
			t.Fatal(err)
		}
	}
}
