package jobs

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/resched/resched/shared/job"
)

// putBatcher gathers the API's puts that arrive together into batches (group commit): a batch
// costs two round trips to Redis (its collections, its writes; the replies are the jobs as
// written, not read back) where each put alone cost as many. Before batching, at 32 clients,
// Redis spent 84 µs per put, most of it reading and writing sockets. An idle planner still
// writes each put at once, alone.
//
// There is no goroutine of its own: a caller queues its put and waits for a free slot (or its
// outcome); with the slot it takes every put queued so far and applies them, then waits for
// its own put's outcome, which it applied or another caller who took it first does. A queued
// put's caller so always waits for a slot, and each caller takes a slot once.
type putBatcher struct {
	slots chan struct{} // batches being applied at once
	mu    sync.Mutex
	queue []*pendingPut
}

// putBatches is how many batches one planner applies at once: a batch waits for Redis most of
// its time, so a few overlap, and the puts that arrive meanwhile gather.
const putBatches = 4

// putBatchTimeout bounds a batch. A batch is not cut short when the caller applying it gives
// up, since it carries other callers' puts.
const putBatchTimeout = 20 * time.Second

// pendingPut is one put and, once done is closed, its outcome.
type pendingPut struct {
	change  Change
	def     *job.Definition // the stored job, secrets removed
	created bool
	err     error
	done    chan struct{}
}

func newPutBatcher() *putBatcher {
	return &putBatcher{slots: make(chan struct{}, putBatches)}
}

// put applies p, in a batch with the puts queued beside it, and returns once p is done.
func (b *putBatcher) put(ctx context.Context, s *Service, p *pendingPut) {
	b.mu.Lock()
	b.queue = append(b.queue, p)
	b.mu.Unlock()
	select {
	case <-p.done:
		return
	case b.slots <- struct{}{}:
	}
	b.mu.Lock()
	batch := b.queue // p among them, unless another caller took p first
	b.queue = nil
	b.mu.Unlock()
	if len(batch) > 0 {
		s.putBatch(context.WithoutCancel(ctx), batch)
	}
	<-b.slots
	<-p.done
}

// putBatch applies a batch and closes every put's done; each reply is the job as it was
// stored. The puts a round leaves unchecked (ErrNotChecked: the puts before them took half of
// putBatchTimeout) go in the next round: each put is its own caller's, not to fail for others.
func (s *Service) putBatch(ctx context.Context, batch []*pendingPut) {
	defer func() {
		for _, p := range batch {
			close(p.done)
		}
	}()
	for left := batch; len(left) > 0; {
		left = s.putRound(ctx, left)
	}
}

// putRound applies puts within putBatchTimeout and returns those left unchecked.
func (s *Service) putRound(ctx context.Context, puts []*pendingPut) []*pendingPut {
	work, cancel := context.WithTimeout(ctx, putBatchTimeout)
	defer cancel()
	changes := make([]Change, len(puts))
	for i, p := range puts {
		changes[i] = p.change
	}
	var left []*pendingPut
	for i, o := range s.Apply(work, changes) {
		p := puts[i]
		if errors.Is(o.Err, ErrNotChecked) {
			left = append(left, p)
			continue
		}
		p.created, p.err = o.Created, o.Err
		if o.Err == nil {
			// The definition the put wrote, not the blob it wrote decoded again: the same, and
			// decoding it cost a twentieth of a put.
			p.def = definition(o.Stored, *o.Properties)
		}
	}
	return left
}
