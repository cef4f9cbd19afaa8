package consumer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/shared/job"
)

// Batches are bounded so that one message stays well under NATS's payload limit (1 MiB by
// default) and one lost publish costs few attempts.
const (
	maxReportBatch = 256
	maxReportBytes = 256 << 10
)

// reportWindow is how many batches may wait for the stream's acknowledgement at once: the
// balance between the two costs of a result. With one, a delivery waited for the batch before
// its own too and held its slot that long (the lag p99 of 1,000 occurrences due at one second
// rose from 250 to 450 ms); with 16, results rarely gathered (a burst of 100,000 took 43,600
// messages rather than 7,500) and the NATS server's share per fire came back. With a few,
// results gather while the window is full, and a delivery waits about one round trip.
const reportWindow = 4

// reporter publishes the results of a worker's deliveries. A delivery hands its result over
// with what to do once the results stream has it (or not): settle its due message, so a due
// message is never acknowledged before its result is stored. One goroutine publishes: the
// results that end within the linger after the first go together, one message per collection
// (docs/nats-api.md). An idle worker so sends each result alone, a linger after it ended, and
// a busy one sends a message, a stored message and an acknowledgement per batch rather than
// per attempt, which was a third of the NATS server's work per fire.
//
// While the worker is still delivering, results wait on past the linger, up to the longest
// wait or until as many are held as the worker may keep unsettled: recording a result (the
// message, the planners' script, the due message's acknowledgement) then takes the CPU once
// the deliveries are done, not while they wait for it. Side by side, 5,000 occurrences due at
// each second reached their targets by a p99 of 235-279 ms rather than 345-361 ms.
//
// The delivery does not wait: its slot is free for the next due message as soon as the
// attempt has ended, and the results waiting for the stream are bounded by the hand-over
// queue and the window (a full queue makes the next hand-over wait).
type reporter struct {
	js       asyncPublisher
	subjects bus.Subjects
	waits    waits
	timeout  time.Duration         // bound on one publish
	retry    func(*nats.Msg) error // a publish the slow way, after the fast one failed
	in       chan report
	window   chan struct{}  // a slot per batch waiting for its acknowledgements
	awaiting sync.WaitGroup // those batches
	done     chan struct{}  // closed when run has returned
	// budget is the most bytes of results put in one message: maxReportBytes, or less once
	// the stream or the server refused a message that large (see alone).
	budget atomic.Int64
}

// waits says how long results wait for others before they are published.
type waits struct {
	linger time.Duration // how long a batch waits for more results (0: not at all)
	// most is how long, counted from the batch's first result, it waits while the worker is
	// delivering; never less than linger.
	most time.Duration
	held int // the most results held back; a batch of maxReportBatch goes at once otherwise
	// quiet says how long the worker has had no delivery running (0 while one runs); nil: always
	// quiet, so a batch waits the linger alone.
	quiet func() time.Duration
}

// settled is how long a worker has had no delivery running before the results it holds go:
// between two pulls of a busy worker nothing runs for a moment.
const settled = 10 * time.Millisecond

// idle reports whether the worker is quiet, and how soon to look again otherwise.
func (w waits) idle() (bool, time.Duration) {
	if w.quiet == nil {
		return true, 0
	}
	q := w.quiet()
	return q >= settled, max(settled-q, settled/2)
}

// report is one result and what to do with its publish's outcome.
type report struct {
	r    bus.Result
	done func(error) // called once, by the goroutine awaiting the result's batch
}

// asyncPublisher is the part of JetStream the reporter uses: a publish that does not wait for
// the stream's acknowledgement.
type asyncPublisher interface {
	PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
}

func newReporter(js asyncPublisher, subjects bus.Subjects, w waits, timeout time.Duration, retry func(*nats.Msg) error) *reporter {
	w.most = max(w.most, w.linger)
	w.held = max(w.held, maxReportBatch)
	p := &reporter{js: js, subjects: subjects, waits: w, timeout: timeout, retry: retry,
		in: make(chan report, maxReportBatch), window: make(chan struct{}, reportWindow), done: make(chan struct{})}
	p.budget.Store(maxReportBytes)
	return p
}

// hand publishes r and calls done with nil once the results stream has it, or with why it
// does not. It waits only while the queue of results handed over is full.
func (p *reporter) hand(r bus.Result, done func(error)) {
	p.in <- report{r: r, done: done}
}

// run publishes until close is called.
func (p *reporter) run() {
	defer close(p.done)
	defer p.awaiting.Wait()
	if p.waits.linger <= 0 {
		for first := range p.in {
			p.flush([]report{first}) // with whatever else waits
		}
		return
	}
	timer := time.NewTimer(time.Hour) // hold resets and stops it
	for first := range p.in {
		held, open := p.hold(first, timer)
		p.flush(held)
		if !open {
			return
		}
	}
}

// hold gathers the results handed over after first until they are to go (see waits); open
// is false once close was called.
func (p *reporter) hold(first report, timer *time.Timer) (held []report, open bool) {
	held = append(make([]report, 0, maxReportBatch), first)
	start := time.Now()
	timer.Reset(p.waits.linger)
	defer timer.Stop()
	for {
		select {
		case rep, ok := <-p.in:
			if !ok {
				return held, false
			}
			held = append(held, rep)
			if len(held) >= p.waits.held {
				return held, true
			}
			if len(held)%maxReportBatch == 0 {
				if idle, _ := p.waits.idle(); idle {
					return held, true
				}
			}
		case <-timer.C:
			age := time.Since(start)
			idle, again := p.waits.idle()
			if idle || age >= p.waits.most {
				return held, true
			}
			timer.Reset(min(again, p.waits.most-age))
		}
	}
}

// flush publishes held in batches of maxReportBatch, each once the window has room for it.
func (p *reporter) flush(held []report) {
	for len(held) > 0 {
		n := min(len(held), maxReportBatch)
		p.window <- struct{}{}
		p.publish(p.gather(held[:n:n]))
		held = held[n:]
	}
}

// gather adds to batch the results waiting, until it is full.
func (p *reporter) gather(batch []report) []report {
	for len(batch) < maxReportBatch {
		select {
		case rep, ok := <-p.in:
			if !ok {
				return batch
			}
			batch = append(batch, rep)
		default:
			return batch
		}
	}
	return batch
}

// close ends run once the results handed over are published and their deliveries finished.
// No hand may follow.
func (p *reporter) close() {
	close(p.in)
	<-p.done
}

// outgoing is one message of a batch: the results of one collection, or as many of them as
// fit.
type outgoing struct {
	reports []report
	size    int // about the bytes of reports' JSON
	msg     *nats.Msg
	ack     jetstream.PubAckFuture
	err     error
}

// publish sends a batch's messages side by side and, in the background, waits for each to
// be stored (a failed one is tried again the slow way), finishes each delivery and frees the
// batch's slot of the window.
func (p *reporter) publish(batch []report) {
	msgs := p.messages(batch)
	for _, m := range msgs {
		m.ack, m.err = p.js.PublishMsgAsync(m.msg)
	}
	p.awaiting.Go(func() {
		p.await(msgs)
		<-p.window
	})
}

func (p *reporter) await(msgs []*outgoing) {
	wait, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	for _, m := range msgs {
		if m.err == nil {
			select {
			case <-m.ack.Ok():
			case m.err = <-m.ack.Err():
			case <-wait.Done():
				m.err = errors.New("no acknowledgement from the results stream in time")
			}
		}
		if m.err != nil && bus.TooLarge(m.err) {
			p.alone(m)
			continue
		}
		if m.err != nil {
			m.err = p.retry(m.msg)
		}
		for _, rep := range m.reports {
			rep.done(m.err)
		}
	}
}

// alone publishes the results of a message refused for its size one to a message, the slow
// way, and halves what later messages may hold: an operator may set the results stream's
// largest message, or the server's max_payload, below maxReportBytes. A result refused even
// alone goes with its message cut to cutMessage. Sent again as it was, a message would be
// refused every time, and each of its deliveries would run again forever.
func (p *reporter) alone(m *outgoing) {
	if len(m.reports) > 1 {
		p.shrink(int64(m.size) / 2)
	}
	for _, rep := range m.reports {
		err := p.retry(p.message([]report{rep}, 0))
		if bus.TooLarge(err) {
			rep.r.Message = job.CutMessage(rep.r.Message, cutMessage) + cutNote
			err = p.retry(p.message([]report{rep}, 0))
		}
		rep.done(err)
	}
}

// shrink lowers the budget to at most b; several batches may be refused at once, and the
// smallest budget wins.
func (p *reporter) shrink(b int64) {
	for {
		cur := p.budget.Load()
		if b >= cur || p.budget.CompareAndSwap(cur, b) {
			return
		}
	}
}

// A result refused for its size even alone keeps this much of its message, and says why.
const (
	cutMessage = 512
	cutNote    = " … (cut: the results stream takes no larger result)"
)

// messages groups a batch by collection, in order, into messages of at most the budget's
// bytes (a larger result goes alone).
func (p *reporter) messages(batch []report) []*outgoing {
	budget := int(p.budget.Load())
	var out []*outgoing
	open := map[string]*outgoing{} // collection → its message being filled
	for _, rep := range batch {
		c := rep.r.Collection
		m := open[c]
		n := len(rep.r.Message) + 320
		if m == nil || m.size+n > budget {
			m = &outgoing{}
			open[c] = m
			out = append(out, m)
		}
		m.reports = append(m.reports, rep)
		m.size += n
	}
	for _, m := range out {
		m.msg = p.message(m.reports, m.size)
	}
	return out
}

// message is one result alone on its job's subject, as a single object, or several of one
// collection on the collection's subject, as an array. The message id lets the stream drop
// a second publish of the same message.
func (p *reporter) message(reports []report, size int) *nats.Msg {
	first := reports[0].r
	if len(reports) == 1 {
		m := nats.NewMsg(p.subjects.Result(first.Collection, first.Job))
		m.Data = first.AppendJSON(make([]byte, 0, 320+len(first.Message)))
		m.Header.Set(bus.HeaderMsgID, bus.ResultMsgID(first))
		return m
	}
	rs := make([]bus.Result, len(reports))
	for i, rep := range reports {
		rs[i] = rep.r
	}
	m := nats.NewMsg(p.subjects.Results(first.Collection))
	m.Data = bus.AppendResultsJSON(make([]byte, 0, size+len(reports)+2), rs)
	m.Header.Set(bus.HeaderMsgID, bus.ResultsMsgID(rs))
	return m
}
