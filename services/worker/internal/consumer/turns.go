package consumer

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// turns bounds the deliveries of one collection a worker runs at once, so that a team whose
// targets hang cannot hold every slot: a message of a collection at its limit waits, held
// by this worker and kept in progress, without a slot, and is delivered by the next of its
// collection's deliveries to end, in the order it came. Holding it rather than handing it
// back keeps its delivery count, which numbers its attempts: a message handed back would
// lose a retry to every turn it waited.
//
// The messages held are bounded (most): when that many wait, a message over its collection's
// limit is delivered anyway, as without a limit, rather than handed back. The due stream's
// MaxAckPending bounds what all workers hold in all, so a worker holding more would only stop
// the other collections' messages further up.
type turns struct {
	limit int // deliveries of one collection at once; 0: no limit
	most  int // messages held in all

	mu     sync.Mutex
	active map[string]int           // deliveries running, by collection
	held   map[string][]heldMessage // waiting, oldest first, by collection
	n      int                      // messages held
	closed bool                     // stopping: nothing more is held or taken from the hold
}

// heldMessage is a message waiting for its collection's turn, kept in progress by its beat.
type heldMessage struct {
	msg  jetstream.Msg
	beat *beat
	at   time.Time // when it began to wait
}

func newTurns(limit, most int) *turns {
	return &turns{limit: limit, most: most, active: map[string]int{}, held: map[string][]heldMessage{}}
}

// admit says whether a delivery of msg, of collection, may start now (0, and counts it), or
// holds msg until its collection's turn, kept in progress by the beat keep starts, and
// returns how many of its collection wait. One step, under one lock: a delivery of the
// collection ending in between would leave msg held with none to take it.
func (t *turns) admit(collection string, msg jetstream.Msg, keep func(jetstream.Msg) *beat) (waiting int) {
	if t.limit <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[collection] < t.limit || t.n >= t.most || t.closed {
		t.active[collection]++
		return 0
	}
	t.held[collection] = append(t.held[collection], heldMessage{msg: msg, beat: keep(msg), at: time.Now()})
	t.n++
	return len(t.held[collection])
}

// done ends a delivery of collection and returns the next message of that collection to
// deliver in its place, if one waits; that delivery is counted as running.
func (t *turns) done(collection string) (heldMessage, bool) {
	if t.limit <= 0 {
		return heldMessage{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.held[collection]
	if len(q) == 0 || t.closed {
		if t.active[collection]--; t.active[collection] <= 0 {
			delete(t.active, collection)
		}
		return heldMessage{}, false
	}
	next := q[0]
	q[0] = heldMessage{}
	if q = q[1:]; len(q) == 0 {
		delete(t.held, collection)
	} else {
		t.held[collection] = q
	}
	t.n--
	return next, true
}

// waiting is the number of messages held.
func (t *turns) waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// close stops holding and returns every message held, for the caller to hand back.
func (t *turns) close() []heldMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	var all []heldMessage
	for c, q := range t.held {
		all = append(all, q...)
		delete(t.held, c)
	}
	t.n = 0
	return all
}

// heldLogEvery bounds how often a worker says that a collection's occurrences wait their turn.
const heldLogEvery = time.Minute

// wait holds msg when its collection is at its limit (true); false when it is delivered now.
func (c *Consumer) wait(msg jetstream.Msg) bool {
	if c.turns.limit <= 0 {
		return false
	}
	collection := c.cfg.Subjects.DueCollection(msg.Subject())
	n := c.turns.admit(collection, msg, c.heartbeat)
	if n == 0 {
		return false
	}
	now := time.Now().UnixNano()
	if last := c.heldSaid.Load(); now-last >= int64(heldLogEvery) && c.heldSaid.CompareAndSwap(last, now) {
		c.log.Warn("a collection has its most deliveries in flight; its other occurrences wait their turn (docs/security.md, Workers)",
			"collection", collection, "limit", c.cfg.CollectionConcurrency, "waiting", n)
	}
	return true
}

// deliver runs msg, then, in its place, each message of its collection that waits for a turn,
// leaving out those whose job was deleted while they waited.
func (c *Consumer) deliver(ctx context.Context, msg jetstream.Msg) {
	if c.turns.limit <= 0 {
		c.handle(ctx, msg)
		return
	}
	collection := c.cfg.Subjects.DueCollection(msg.Subject())
	for {
		c.handle(ctx, msg)
		for {
			next, ok := c.turns.done(collection)
			if !ok {
				return
			}
			next.beat.stop()
			if time.Since(next.at) < c.cfg.RecheckAfter || !c.removed(ctx, next.msg) {
				msg = next.msg
				break
			}
			c.log.Debug("the job of an occurrence was deleted while it waited its turn", "subject", next.msg.Subject())
		}
	}
}

// handBack returns the messages held at a stop to the stream, for any worker to deliver.
// Their delivery count rises by one, as for a delivery abandoned at a stop.
func (c *Consumer) handBack() {
	for _, h := range c.turns.close() {
		h.beat.stop()
		c.settle(&deliveryLog{base: c.log, subject: h.msg.Subject()}, "nak", h.msg.Nak())
	}
}
