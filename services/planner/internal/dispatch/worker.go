package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// roundTimeout bounds one partition's claim-publish-advance, which runs to its end even after
// shutdown begins so that a stop never leaves a published occurrence un-advanced.
const roundTimeout = 30 * time.Second

// worker is one dispatch goroutine and the partitions it owns.
type worker struct {
	cfg        *Config
	partitions []int
	cache      *scheduleCache
}

func (w *worker) run(ctx context.Context) error {
	for ctx.Err() == nil {
		n, err := w.round(ctx)
		if err != nil {
			w.cfg.Metrics.Error("dispatch")
			w.cfg.Logger.Error("dispatch round", "error", err)
		}
		if n == 0 || err != nil {
			w.idle(ctx)
		}
	}
	return nil
}

// idle waits until the earliest due time of the worker's partitions, at most MaxIdle.
func (w *worker) idle(ctx context.Context) {
	wait := w.cfg.MaxIdle
	if at, ok, err := w.cfg.Store.Earliest(ctx, w.partitions); err == nil && ok {
		wait = min(max(at.Add(-w.cfg.Lookahead).Sub(w.cfg.Clock()), time.Millisecond), wait)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// round works each partition until it has nothing due, and returns the occurrences published.
func (w *worker) round(ctx context.Context) (int, error) {
	total := 0
	for _, p := range w.partitions {
		for ctx.Err() == nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), roundTimeout)
			claimed, published, err := w.partition(rctx, p)
			cancel()
			total += published
			if err != nil {
				return total, err
			}
			if claimed < w.cfg.Batch {
				break
			}
		}
	}
	return total, nil
}

// pending is one claimed job on its way through a batch.
type pending struct {
	move    store.Advance
	msg     *nats.Msg              // the occurrence to publish at move.Published; nil for none
	ack     jetstream.PubAckFuture // set once published
	skipped *job.HistoryEntry
}

// publish sends the batch's occurrences in time order, each once it is due: with a lookahead
// some were claimed early, and none may reach a worker before its scheduled time.
func (w *worker) publish(ctx context.Context, batch []pending) {
	slices.SortStableFunc(batch, func(a, b pending) int { return a.move.Published.Compare(b.move.Published) })
	for i := range batch {
		pd := &batch[i]
		if pd.msg == nil {
			continue
		}
		if wait := pd.move.Published.Sub(w.cfg.Clock()); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		ack, err := w.cfg.JS.PublishMsgAsync(pd.msg)
		if err != nil {
			w.cfg.Metrics.Error("publish")
			w.cfg.Logger.Error("publish occurrence", "collection", pd.move.Collection, "job", pd.move.Name, "error", err)
			continue
		}
		pd.ack = ack
	}
}

// partition claims one batch of a partition, publishes it and advances it.
func (w *worker) partition(ctx context.Context, p int) (claimed, published int, err error) {
	now := w.cfg.Clock()
	members, err := w.cfg.Store.Claim(ctx, p, now.Add(w.cfg.Lookahead), now.Add(w.cfg.Lease), w.cfg.Batch)
	if err != nil || len(members) == 0 {
		return 0, 0, err
	}
	w.cfg.Metrics.Claimed(len(members))
	recs, err := w.cfg.Store.LoadJobs(ctx, members)
	if err != nil {
		return len(members), 0, err
	}
	batch := make([]pending, 0, len(recs))
	for _, rec := range recs {
		if rec == nil || rec.State != job.StateEnabled {
			continue // deleted or disabled since the claim: that change already took it out of the due set
		}
		pd, err := w.prepare(rec, now)
		if err != nil {
			w.cfg.Metrics.Error("prepare")
			w.cfg.Logger.Error("prepare occurrence", "collection", rec.Collection, "job", rec.Name, "error", err)
			continue // its lease runs out and it is tried again
		}
		batch = append(batch, pd)
	}
	w.publish(ctx, batch)
	moves := make([]store.Advance, 0, len(batch))
	for _, pd := range batch {
		if pd.msg != nil && pd.ack == nil {
			continue // the publish failed at once: not advanced, the lease runs out and it is retried
		}
		if pd.ack != nil {
			select {
			case <-pd.ack.Ok():
				published++
				w.cfg.Metrics.FireLag(w.cfg.Clock().Sub(pd.move.Published))
			case err := <-pd.ack.Err():
				w.cfg.Metrics.Error("publish")
				w.cfg.Logger.Error("publish occurrence", "collection", pd.move.Collection, "job", pd.move.Name, "error", err)
				continue // not advanced: the lease runs out and it is published again
			case <-ctx.Done():
				return len(members), published, fmt.Errorf("wait for publish acknowledgements: %w", ctx.Err())
			}
		}
		if pd.skipped != nil {
			if err := w.cfg.Store.AppendHistory(ctx, pd.move.Collection, pd.move.Name, *pd.skipped); err != nil {
				return len(members), published, err
			}
		}
		moves = append(moves, pd.move)
	}
	w.cfg.Metrics.Published(published)
	ended, err := w.cfg.Store.Advance(ctx, p, moves)
	if err != nil {
		return len(members), published, err
	}
	w.announce(ended)
	return len(members), published, nil
}

// prepare decides what a claimed job does now (fire its latest due occurrence, skip the
// missed ones) and builds the message to publish.
func (w *worker) prepare(rec *store.Job, now time.Time) (pending, error) {
	move := store.Advance{Collection: rec.Collection, Name: rec.Name, Claimed: rec.Next, Fired: rec.Fired, Occurrence: rec.Occurrence}
	if rec.Next.IsZero() {
		return pending{move: move}, nil // no next time: the advance takes it out of the due set
	}
	e, err := w.cache.get(rec)
	if err != nil {
		return pending{}, err
	}
	due, skipped, next := catchUp(e, rec, now, w.cfg.CatchUp)
	pd := pending{move: move, skipped: skipped}
	pd.move.Next = next
	if due.IsZero() {
		w.cfg.Metrics.Skipped(1)
		return pd, nil
	}
	pd.move.Fired, pd.move.Occurrence, pd.move.Published = rec.Fired+1, rec.Occurrence+1, due
	if o := e.sched.Next(due, rec.Fired+1); !o.Done {
		pd.move.Next = o.Time
	} else {
		pd.move.Next = time.Time{}
	}
	data := bus.AppendDue(nil, rec.Collection, rec.Name, due, pd.move.Occurrence, e.action)
	pd.msg = (&natsMsg{subject: w.cfg.Subjects.Due(rec.Collection, rec.Name), data: data, id: bus.MsgID(rec.Collection, rec.Name, due)}).build()
	return pd, nil
}

func (w *worker) announce(ended []store.Ended) {
	if w.cfg.Events == nil {
		return
	}
	for _, e := range ended {
		kind := bus.EventCompleted
		if e.State == job.StateFaulted {
			kind = bus.EventFaulted
		}
		b, _ := json.Marshal(bus.Event{Kind: kind, Collection: e.Collection, Job: e.Name, Time: w.cfg.Clock().UTC()})
		if err := w.cfg.Events.Publish(w.cfg.Subjects.Event(e.Collection, e.Name, kind), b); err != nil {
			w.cfg.Logger.Warn("publish event", "kind", kind, "collection", e.Collection, "job", e.Name, "error", err)
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
