package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/recovery"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// batchTimeout bounds one batch (claim, publish, advance), which runs to its end even after
// shutdown begins so that a stop never leaves a published occurrence un-advanced.
const batchTimeout = 30 * time.Second

// maxBackoff bounds the wait after a failed round (Redis or NATS away).
const maxBackoff = 2 * time.Second

// partitionDispatcher dispatches one partition while this planner holds its lease.
type partitionDispatcher struct {
	*Dispatcher
	p     int
	cache *scheduleCache
	dueBy time.Time // of the last read of due jobs
}

// run loops until ctx ends: a round when the partition is held, then a sleep until its earliest
// due job (less the lookahead), the end of a hold, a wake-up, or MaxIdle.
func (pd *partitionDispatcher) run(ctx context.Context) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		done, hold, ok := pd.cfg.Leases.Use(pd.p)
		if !ok {
			pd.sleep(ctx, time.Time{})
			continue
		}
		pd.slots <- struct{}{}
		earliest, err := pd.round(ctx, hold.DueBy)
		<-pd.slots
		done()
		switch {
		case errors.Is(err, store.ErrNotOwner):
			pd.cfg.Leases.Lost(pd.p)
		case err != nil:
			pd.cfg.Metrics.Error("dispatch")
			pd.cfg.Logger.Error("dispatch round", "partition", pd.p, "error", err)
			backoff = min(max(2*backoff, 100*time.Millisecond), maxBackoff)
			pd.pause(ctx, backoff)
		default:
			backoff = 0
			if pd.putDuring(earliest, pd.dueBy) {
				pd.linger(ctx, nil)
				continue
			}
			if !hold.Until.IsZero() && (earliest.IsZero() || hold.Until.Before(earliest)) {
				// What the hold keeps goes once it lifts, not up to MaxIdle later.
				earliest = hold.Until.Add(pd.cfg.Lookahead)
			}
			pd.sleep(ctx, earliest)
		}
	}
}

// putDuring says a job came due during the round just ended and a wake-up says a put or a
// change brought it: the loop then lingers as after any other wake-up. The round read
// everything due by dueBy (its time of reading plus the lookahead), so a job due by then and
// still in the due set came after that read; a job put to run now is (with a lookahead longer
// than a round). Without this, a put heard while a round ran made the next round start at
// once for the one or two jobs put meanwhile: at 1,000 jobs a second put to run now, a round
// went for every three or four fires rather than ten, and a fire cost nearly twice as much.
// A job planned after dueBy is read at most the linger after its planned look, so still before
// its time while the lookahead is the longer (250 ms and 10 ms by default).
func (pd *partitionDispatcher) putDuring(earliest, dueBy time.Time) bool {
	if earliest.IsZero() || earliest.After(dueBy) {
		return false
	}
	select {
	case <-pd.wake[pd.p]:
		return true
	default:
		return false
	}
}

// sleep waits until earliest less the lookahead (zero: no due job), at most MaxIdle, or a wake
// and its linger.
func (pd *partitionDispatcher) sleep(ctx context.Context, earliest time.Time) {
	wait := pd.cfg.MaxIdle
	if !earliest.IsZero() {
		wait = min(earliest.Add(-pd.cfg.Lookahead).Sub(pd.cfg.Clock()), wait)
	}
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-pd.wake[pd.p]:
		pd.linger(ctx, t.C)
	}
}

// linger waits WakeLinger after a wake-up, or less when the planned look (planned; nil: none)
// or ctx comes first.
func (pd *partitionDispatcher) linger(ctx context.Context, planned <-chan time.Time) {
	if pd.cfg.WakeLinger <= 0 {
		return
	}
	l := time.NewTimer(pd.cfg.WakeLinger)
	defer l.Stop()
	select {
	case <-ctx.Done():
	case <-planned:
	case <-l.C:
	}
}

// pause waits d, or less when ctx ends.
func (pd *partitionDispatcher) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// round works the partition in batches until it has nothing more due now (after dueAfter, when
// not zero), and returns the earliest time left in its due set. While jobs due by dueAfter wait
// (an outage settling), that may be one of theirs: the next round then comes at once and finds
// the earliest after dueAfter, or none (the loop then looks again when the hold ends).
func (pd *partitionDispatcher) round(ctx context.Context, dueAfter time.Time) (time.Time, error) {
	for {
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
		full, earliest, err := pd.batch(bctx, dueAfter)
		cancel()
		if err != nil || !full || ctx.Err() != nil {
			return earliest, err
		}
	}
}

// pending is one claimed job on its way through a batch.
type pending struct {
	move store.Advance
	held store.Advance // the job as read, nothing fired: what a park keeps
	msgs []*outgoing   // its occurrences, in order
}

// outgoing is one occurrence to publish at its time.
type outgoing struct {
	at      time.Time
	c, j    string // its job's collection and name
	msg     *nats.Msg
	ack     jetstream.PubAckFuture
	err     error // of the last send
	ok      bool  // acknowledged
	refused error // the stream refuses it for good: not sent again
	dropped bool  // its job changed while it was held for its time: not sent (changeWatch)
}

// send publishes the message without waiting for its acknowledgement.
func (m *outgoing) send(js jetstream.JetStream) { m.ack, m.err = js.PublishMsgAsync(m.msg) }

// wait returns once the last send is acknowledged (nil) or failed, or once the try's
// acknowledgements have stalled (errNoAck, unless this one is in already).
func (m *outgoing) wait(ctx context.Context, w *ackWatch) error {
	if m.err != nil {
		return m.err
	}
	if w.stalled {
		select {
		case <-m.ack.Ok():
			return nil
		case err := <-m.ack.Err():
			return err
		default:
			return errNoAck
		}
	}
	select {
	case <-m.ack.Ok():
		w.t.Reset(ackStall)
		return nil
	case err := <-m.ack.Err():
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-w.t.C:
		w.stalled = true
		return m.wait(ctx, w)
	}
}

// ackStall is how long a try of a round waits for its next acknowledgement before it takes the
// messages not acknowledged as failed, to send them again under their ids (a copy stored is
// dropped). A stream leader that hangs never answers, and the acknowledgements had no deadline
// but the batch's (30 s): in a fault run with the leader paused, no job fired for 30 s. In a
// burst they keep coming, microseconds apart, however long the last one takes.
const ackStall = 2 * time.Second

var errNoAck = fmt.Errorf("no acknowledgement for %v", ackStall)

// ackWatch is a wait for acknowledgements: stalled once none came for ackStall. A round's
// batches share one for the messages it sent at first, which all went out before the first
// batch was confirmed: once it has stalled, the later batches take what has not come as failed
// at once. A watch per batch waited ackStall again for each, and a round of 32 batches sent to
// a hung stream leader took a minute. A try that sends again gets a watch of its own.
type ackWatch struct {
	t       *time.Timer
	stalled bool
}

func newAckWatch() *ackWatch { return &ackWatch{t: time.NewTimer(ackStall)} }

// chunk is one batch of a round: jobs advanced together, and their messages.
type chunk struct {
	jobs []pending
	msgs []*outgoing
}

// batch reads up to roundBatches batches of due jobs, publishes what fires, then confirms and
// advances a batch at a time. Every batch is published before the first one's acknowledgements
// are awaited: a round trip per batch had kept the due stream waiting, so 5,000 jobs due at
// one second went out over 250 ms in 20 rounds. full says the read was as large as allowed, so
// more may be due.
func (pd *partitionDispatcher) batch(ctx context.Context, dueAfter time.Time) (full bool, earliest time.Time, err error) {
	watch := &pd.watches[pd.p]
	watch.begin() // before the read: a change heard after it may have come after the read
	defer watch.end()
	now := pd.cfg.Clock()
	limit := pd.cfg.Batch * roundBatches
	pd.dueBy = now.Add(pd.cfg.Lookahead)
	cctx, cancel := context.WithTimeout(ctx, pd.cfg.CallTimeout)
	members, earliest, err := pd.cfg.Store.Claim(cctx, pd.p, pd.cfg.Leases.Token(), dueAfter, pd.dueBy, limit)
	cancel()
	if err != nil || len(members) == 0 {
		return false, earliest, err
	}
	pd.cfg.Metrics.Claimed(len(members))
	chunks, cut, lerr := pd.prepareAll(ctx, members, now)
	if len(chunks) == 0 {
		return false, earliest, lerr
	}
	// After a batch failed for good, the later ones are confirmed without retries: they were
	// published already, and whatever was stored is advanced, so one job NATS keeps refusing
	// does not hold back the round's thousands; in an outage their sends have failed too, and
	// a retry each would spend two more seconds a batch.
	retries, ferr := pd.cfg.PublishRetries, error(nil)
	w := newAckWatch()
	defer w.t.Stop()
	for _, c := range chunks {
		left, err := pd.finish(ctx, c, retries, w)
		if !left.IsZero() {
			earliest = left
		}
		if err != nil && ferr == nil {
			retries, ferr = 0, err
		}
	}
	if ferr != nil {
		return false, earliest, errors.Join(lerr, ferr)
	}
	// A job whose occurrence was dropped is read again at once, as its change left it. None was
	// unless a change was heard: a batch then costs no pass over its messages.
	dropped := watch.heard.Load() &&
		slices.ContainsFunc(chunks, func(c *chunk) bool { return slices.ContainsFunc(c.msgs, func(m *outgoing) bool { return m.dropped }) })
	return len(members) == limit || cut || dropped, earliest, lerr
}

// prepareAll reads the claimed jobs a batch at a time, decides what each fires and publishes
// the messages already due as it goes (the rest are sent at their time, once all are read).
// cut says some jobs were left for the next round: a batch publishes at most Batch messages.
// A read that fails after some batches ends the reading; those are still published and
// advanced, and the error returned beside them.
func (pd *partitionDispatcher) prepareAll(ctx context.Context, members []string, now time.Time) (chunks []*chunk, cut bool, err error) {
	r := pd.rules()
	var unsent []*outgoing
	for start := 0; start < len(members) && !cut; start += pd.cfg.Batch {
		recs, held, lerr := pd.load(ctx, members[start:min(start+pd.cfg.Batch, len(members))])
		if lerr != nil {
			err, cut = lerr, true
			break
		}
		c := &chunk{jobs: make([]pending, 0, len(recs))}
		for i, rec := range recs {
			if rec == nil {
				continue // deleted since the claim: the delete took it out of the due set
			}
			pj := pd.prepare(rec, held[i], now, r)
			if len(c.msgs)+len(pj.msgs) > pd.cfg.Batch && len(c.jobs) > 0 {
				cut = true // the rest stay due
				break
			}
			c.jobs = append(c.jobs, pj)
			c.msgs = append(c.msgs, pj.msgs...)
		}
		chunks = append(chunks, c)
		unsent = pd.send(ctx, append(unsent, c.msgs...), false)
	}
	pd.send(ctx, unsent, true)
	return chunks, cut, err
}

// finish waits for a batch's acknowledgements (first through w, the round's watch), sending
// again what failed up to retries times, and advances the jobs whose messages were all stored.
// A job whose occurrence the stream refuses for good is parked Faulted instead. It returns the
// earliest time left in the due set (zero when not advanced).
func (pd *partitionDispatcher) finish(ctx context.Context, c *chunk, retries int, w *ackWatch) (time.Time, error) {
	published, err := pd.confirm(ctx, c.msgs, retries, w)
	pd.cfg.Metrics.Published(published)
	moves := make([]store.Advance, 0, len(c.jobs))
	for _, pj := range c.jobs {
		if slices.ContainsFunc(pj.msgs, func(m *outgoing) bool { return !m.ok && m.refused == nil }) {
			continue // not advanced: the next round reads it again, and JetStream drops a copy
		}
		if i := slices.IndexFunc(pj.msgs, func(m *outgoing) bool { return m.refused != nil }); i >= 0 {
			moves = append(moves, pd.park(pj, pj.msgs[i]))
			continue
		}
		moves = append(moves, pj.move)
		if len(pj.move.History) > 0 {
			pd.cfg.Metrics.Skipped(len(pj.move.History))
		}
	}
	if len(moves) == 0 {
		return time.Time{}, err
	}
	actx, cancel := context.WithTimeout(ctx, pd.cfg.CallTimeout)
	ended, left, aerr := pd.cfg.Store.Advance(actx, pd.p, pd.cfg.Leases.Token(), moves)
	cancel()
	if aerr != nil {
		return time.Time{}, errors.Join(err, aerr)
	}
	pd.announce(ended)
	return left, err
}

// park is the move of a job whose occurrence the stream refuses for good (a message over the
// stream's or the server's size limit, set by an operator below what a definition may hold):
// sent again at every round it would fail at every round and hold its partition back, so it
// is taken out of the schedule, as it was read, with a history entry saying why. Were some of
// a catch-up's occurrences stored before one was refused (sizes a digit apart at the limit),
// those still run; the job's counts stay as read.
func (pd *partitionDispatcher) park(pj pending, m *outgoing) store.Advance {
	pd.cfg.Metrics.Error("refused")
	pd.cfg.Logger.Error("the due stream refuses an occurrence for good; the job is parked Faulted",
		"collection", pj.held.Collection, "job", pj.held.Name, "error", m.refused)
	now := pd.cfg.Clock().UTC()
	move := pj.held
	move.Park = job.StateFaulted
	move.History = append(slices.Clip(pj.move.History), job.HistoryEntry{StartTime: now, EndTime: now,
		ExpectedExecutionTime: m.at, ActionName: job.ActionNameMain, Status: job.ExecutionFailed,
		Message: "the due stream refuses this occurrence for good (" + m.refused.Error() + "), so the job is Faulted; " +
			"put it again to resume once the stream takes a message this large"})
	return move
}

// load reads the claimed jobs, with the definitions only of those this partition does not
// hold compiled at their version: a recurring job's fires read its state alone. The compiled
// definitions it holds are returned beside the jobs, since compiling a new one may evict
// another from the cache before the batch is done with it. A job whose version moved since it
// was compiled (put again) is read again whole.
func (pd *partitionDispatcher) load(ctx context.Context, members []string) ([]*store.Job, []*compiled, error) {
	ctx, cancel := context.WithTimeout(ctx, pd.cfg.CallTimeout)
	defer cancel()
	recs, err := pd.cfg.Store.LoadClaimed(ctx, members, func(i int) bool { return pd.cache.holds(members[i]) })
	if err != nil {
		return nil, nil, err
	}
	held := make([]*compiled, len(recs))
	var moved []int
	for i, rec := range recs {
		if rec == nil || rec.Definition != nil {
			continue
		}
		if held[i] = pd.cache.current(rec); held[i] == nil {
			moved = append(moved, i)
		}
	}
	if len(moved) == 0 {
		return recs, held, nil
	}
	again := make([]string, len(moved))
	for k, i := range moved {
		again[k] = members[i]
	}
	fresh, err := pd.cfg.Store.LoadJobs(ctx, again)
	if err != nil {
		return nil, nil, err
	}
	for k, i := range moved {
		recs[i] = fresh[k] // nil when deleted meanwhile
	}
	return recs, held, nil
}

func (pd *partitionDispatcher) rules() rules {
	return rules{
		window: pd.cfg.CatchUp, policy: pd.cfg.CatchUpPolicy, burst: min(pd.cfg.CatchUpRate, pd.cfg.Batch), pace: time.Second,
		outages: pd.cfg.Leases.Outages(),
	}
}

// prepare decides what a claimed job does now and builds its messages; held is its definition
// compiled at its version when load found it in the cache (the job was then read without
// it). A job whose stored definition no longer decodes or compiles is parked Faulted with a
// history entry saying why, rather than read again and failing at every round.
func (pd *partitionDispatcher) prepare(rec *store.Job, held *compiled, now time.Time, r rules) pending {
	move := store.Advance{Collection: rec.Collection, Name: rec.Name, Version: rec.Version, Claimed: rec.Next,
		Next: rec.Next, Fired: rec.Fired, Occurrence: rec.Occurrence}
	if rec.State != job.StateEnabled || rec.Next.IsZero() {
		// Not schedulable: the advance takes it out of the due set (and ends a series over).
		move.Next = time.Time{}
		if rec.State != job.StateEnabled {
			move.Next = rec.Next
		}
		return pending{move: move}
	}
	// A panic here (a bug that this job's definition trips) would stop the planner, and then
	// each planner that takes the partition over and reads the job again: the job is parked
	// instead, as one whose definition no longer compiles.
	pj, err := recovery.Call(func() (pending, error) { return pd.occurrences(rec, held, move, now, r) })
	if err != nil {
		pd.cfg.Metrics.Error("prepare")
		why := "the stored definition no longer compiles, so the job is Faulted: " + err.Error()
		if p, ok := errors.AsType[*recovery.Panic](err); ok {
			p.Log(pd.cfg.Logger, "dispatch of a job; the job is parked Faulted", "collection", rec.Collection, "job", rec.Name)
			why = "the planner failed on this job, so the job is Faulted: " + err.Error()
		} else {
			pd.cfg.Logger.Error("stored definition does not compile; the job is parked Faulted", "collection", rec.Collection, "job", rec.Name, "error", err)
		}
		move.Park = job.StateFaulted
		move.History = []job.HistoryEntry{{StartTime: now.UTC(), EndTime: now.UTC(), ExpectedExecutionTime: rec.Next,
			ActionName: job.ActionNameMain, Status: job.ExecutionFailed, Message: why + "; put it again to resume"}}
		return pending{move: move}
	}
	return pj
}

// occurrences plans a schedulable job from its compiled definition (held, or the cache's) and
// builds the messages of the occurrences it fires now.
func (pd *partitionDispatcher) occurrences(rec *store.Job, held *compiled, move store.Advance, now time.Time, r rules) (pending, error) {
	e, err := held, error(nil)
	if e == nil {
		e, err = pd.cache.get(rec)
	}
	if err != nil {
		return pending{}, err
	}
	f := plan(e, rec, now, r)
	pj := pending{held: move}
	move.Next, move.DueAt, move.Fired, move.History = f.next, f.dueAt, f.fired, f.skipped
	pj.move = move
	for _, at := range f.fire {
		move.Occurrence++
		data := bus.AppendDue(nil, rec.Collection, rec.Name, rec.Incarnation, at, move.Occurrence, e.action)
		pj.msgs = append(pj.msgs, &outgoing{at: at, c: rec.Collection, j: rec.Name, msg: (&natsMsg{subject: pd.cfg.Subjects.Due(rec.Collection, rec.Name), data: data,
			id: bus.MsgID(rec.Collection, rec.Name, rec.Incarnation, at)}).build()})
		pj.move.Published = at
	}
	pj.move.Occurrence = move.Occurrence
	return pj, nil
}

// send publishes msgs in time order, without waiting for their acknowledgements, and returns
// those it left: with all, each once it is due (a lookahead read some early, and none may
// reach a worker before its time) and none left; without, only those due already.
func (pd *partitionDispatcher) send(ctx context.Context, msgs []*outgoing, all bool) []*outgoing {
	slices.SortStableFunc(msgs, func(a, b *outgoing) int { return a.at.Compare(b.at) })
	for i, m := range msgs {
		if wait := m.at.Sub(pd.cfg.Clock()); wait > 0 {
			if !all {
				return msgs[i:]
			}
			pd.pause(ctx, wait)
		}
		if pd.watches[pd.p].changed(m.c, m.j) {
			m.dropped = true
			continue
		}
		m.send(pd.cfg.JS)
	}
	return nil
}

// confirm waits for the acknowledgements of messages sent. Those that fail are sent again up
// to retries times, over about two seconds in all (a stream leader election), under the same
// message id, so a copy that did get stored is dropped; those the stream refuses for good are
// marked so and not sent again. The first try waits through w; it returns how many were
// acknowledged.
func (pd *partitionDispatcher) confirm(ctx context.Context, msgs []*outgoing, retries int, w *ackWatch) (int, error) {
	acked := 0
	for try := 0; ; try++ {
		var failed int
		var last error
		tw := w
		if try > 0 {
			tw = newAckWatch()
		}
		wasStalled := tw.stalled
		for _, m := range msgs {
			if m.ok || m.refused != nil || m.dropped {
				continue
			}
			if err := m.wait(ctx, tw); err != nil {
				if bus.TooLarge(err) {
					m.refused = err
					continue
				}
				failed, last = failed+1, err
				pd.cfg.Metrics.Error("publish_retry")
				continue
			}
			m.ok, acked = true, acked+1
			pd.cfg.Metrics.FireLag(pd.cfg.Clock().Sub(m.at))
		}
		if tw != w {
			tw.t.Stop()
		}
		if tw.stalled && !wasStalled {
			// Silent otherwise: a hung stream leader answers nothing and returns no error.
			pd.cfg.Metrics.Error("ack_stall")
			pd.cfg.Logger.Warn("the due stream acknowledged nothing for a while; what it did not acknowledge is sent again",
				"partition", pd.p, "waited", ackStall.String(), "failed", failed)
		}
		switch {
		case failed == 0:
			return acked, nil
		case try >= retries || ctx.Err() != nil:
			pd.cfg.Metrics.Error("publish")
			if bus.Full(last) {
				return acked, fmt.Errorf("%w: %d of %d: %w (%v); they wait in Redis and go once the workers have taken what it holds, or it has more room",
					errStalled, failed, len(msgs), errDueStreamFull, last)
			}
			return acked, fmt.Errorf("%w: %d of %d, the last because %v", errStalled, failed, len(msgs), last)
		}
		pd.pause(ctx, time.Duration(1<<try)*125*time.Millisecond)
		for _, m := range msgs {
			if !m.ok && m.refused == nil && !m.dropped {
				m.send(pd.cfg.JS)
			}
		}
	}
}

func (pd *partitionDispatcher) announce(ended []store.Ended) {
	if pd.cfg.Events == nil {
		return
	}
	for _, e := range ended {
		kind := bus.EventCompleted
		if e.State == job.StateFaulted {
			kind = bus.EventFaulted
		}
		b := bus.AppendEvent(nil, bus.Event{Kind: kind, Collection: e.Collection, Job: e.Name, Time: pd.cfg.Clock().UTC()})
		if err := pd.cfg.Events.Publish(pd.cfg.Subjects.Event(e.Collection, e.Name, kind), b); err != nil {
			pd.cfg.Logger.Warn("publish event", "kind", kind, "collection", e.Collection, "job", e.Name, "error", err)
		}
	}
}

// natsMsg builds a JetStream message with its de-duplication id.
type natsMsg struct {
	subject, id string
	data        []byte
}

func (m *natsMsg) build() *nats.Msg {
	// bus.HeaderMsgID is canonical already: Header.Set would canonicalise it again per fire.
	return &nats.Msg{Subject: m.subject, Data: m.data, Header: nats.Header{bus.HeaderMsgID: []string{m.id}}}
}
