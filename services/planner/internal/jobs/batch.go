package jobs

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/recovery"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// Change is one change of a batch: a definition to put, or a delete.
type Change struct {
	Collection, Name string
	Raw              []byte // the definition; nil for a delete
	// Decoded is Raw already decoded and checked (Validator.Decode), when the caller did it.
	Decoded    *job.Definition
	Delete     bool
	CreateOnly bool // a put that only creates: an existing job is a Conflict
	// Stamp is the change's place in the intake stream (zero for the API): changes to one job
	// end as the newest says, whatever order they are applied in (store.PutJob).
	Stamp store.Stamp
}

// Outcome is what became of one change.
type Outcome struct {
	Created bool // a put created the job; a delete found it
	Stale   bool // an intake message older than the job's last: nothing changed
	// Err is a refusal (an *Error: the change cannot be made as it is) or a failure to retry.
	Err error
	// Secrets reports whether the definition held secrets (the intake erases those messages).
	Secrets bool
	// Stored is a put's job as it was stored, what a read right after it would give (nil for
	// a delete, a refusal or a stale change): the API replies with it without reading it back.
	Stored *store.Job
	// Properties is, with Stored, the definition Stored.Definition encodes (its secrets
	// sealed; without state and status), so that a reply need not decode it again.
	Properties *job.Properties
}

// Apply makes a batch of changes: each definition is checked as a put would check it, then
// every write goes to Redis in one round trip per node, in order, so that changes to one job
// apply in the order given. Events follow as for single changes. A refusal is the change's
// own; the others go on.
func (s *Service) Apply(ctx context.Context, changes []Change) []Outcome {
	out := make([]Outcome, len(changes))
	writes := make([]store.Write, 0, len(changes))
	at := make([]int, 0, len(changes)) // the change of each write
	colls := map[string]cachedCollection{}
	now := s.now()
	until := checkUntil(ctx, s.wall())
	props := make([]*job.Properties, 0, len(changes)) // the definition of each write
	for i, ch := range changes {
		if i > 0 && !until.IsZero() && s.wall().After(until) {
			out[i].Err = ErrNotChecked
			continue
		}
		w, def, err := s.checked(ctx, ch, colls, now)
		out[i].Secrets = def != nil && def.Properties.Action.HasSecrets()
		if err != nil {
			out[i].Err = err
			continue
		}
		writes = append(writes, w)
		at = append(at, i)
		if def != nil {
			props = append(props, &def.Properties)
		} else {
			props = append(props, nil)
		}
	}
	results := s.store.Apply(ctx, writes)
	s.recheck(ctx, writes, props, results, now)
	s.tellChanged(writes, results)
	s.purgeAll(ctx, writes, results)
	var wake map[int]string // one wake-up a partition for the batch, not one a job
	for k, a := range results {
		i, ch := at[k], changes[at[k]]
		out[i].Created, out[i].Stale = a.Created, a.Stale
		if a.Err != nil {
			out[i].Err = storeError(a.Err, ch.Collection, ch.Name)
			continue
		}
		if s.applied(ch, writes[k], a) {
			if wake == nil {
				wake = map[int]string{}
			}
			wake[s.store.PartitionOf(ch.Collection)] = ch.Collection
		}
		if p := writes[k].Put; p != nil && !a.Stale {
			out[i].Stored = &store.Job{Collection: p.Collection, Name: p.Name, Definition: p.Definition, Version: a.Version,
				Next: p.Next, State: p.State, Counters: a.Counters}
			out[i].Properties = props[k]
		}
	}
	for _, c := range wake {
		s.wake(c)
	}
	for i, ch := range changes {
		if out[i].Err != nil {
			s.rejected(ch.Collection, ch.Name, ch.Stamp.Seq, out[i].Err)
		}
	}
	return out
}

// ErrNotChecked: a change of a batch was left unchecked and unstored, the batch's checks having
// taken half the time its request allows; it is to be sent again.
var ErrNotChecked = errors.New("not checked: the changes before it in the same batch took the time allowed; send it again")

// checkUntil is when Apply stops checking a batch's changes: half-way to ctx's deadline, so that
// what was checked is still stored in time, and a request whose definitions take long to check
// (each client certificate's key derivation) holds its planner no longer than its deadline. A
// batch's first change is always checked, so a batch sent again goes forward. Zero: no deadline.
func checkUntil(ctx context.Context, now time.Time) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Time{}
	}
	return now.Add(d.Sub(now) / 2)
}

// tellChanged tells the planners dispatching the jobs a batch replaced or deleted (changed),
// one message a partition, before a delete's purge and before any answer.
func (s *Service) tellChanged(writes []store.Write, results []store.Applied) {
	if s.waker == nil {
		return
	}
	var byPart map[int][]string
	for k, a := range results {
		var c, j string
		switch w := writes[k]; {
		case a.Err != nil || a.Stale:
			continue
		case w.Delete != nil && a.Created: // Created: the job existed
			c, j = w.Delete.Collection, w.Delete.Name
		case w.Put != nil && !a.Created:
			c, j = w.Put.Collection, w.Put.Name
		default:
			continue
		}
		if byPart == nil {
			byPart = map[int][]string{}
		}
		p := s.store.PartitionOf(c)
		byPart[p] = append(byPart[p], store.Member(c, j))
	}
	for p, members := range byPart {
		s.waker.Changed(p, members)
	}
}

// purgesAtOnce bounds the purges of a batch made at once: each is a JetStream request or two,
// and one after another they held the intake to about 3,300 deletes or disables a second.
const purgesAtOnce = 32

// purgeAll removes from the due stream the messages of the jobs a batch deleted or disabled
// (purgeStopped), up to purgesAtOnce at a time, before their events are told.
func (s *Service) purgeAll(ctx context.Context, writes []store.Write, results []store.Applied) {
	if s.purger == nil {
		return
	}
	var wg sync.WaitGroup
	at := make(chan struct{}, purgesAtOnce)
	for k, a := range results {
		if a.Err != nil || a.Stale || !(a.Disabled || writes[k].Delete != nil && a.Created) {
			continue
		}
		at <- struct{}{}
		wg.Go(func() {
			defer func() { <-at }()
			s.purgeStopped(ctx, a.Purge)
		})
	}
	wg.Wait()
}

// checked is write, with a panic (a bug that this change's definition trips) made the
// change's own refusal: the batch's other changes apply, and the intake does not take the
// change up again and again, each time stopping the planner that reads it.
func (s *Service) checked(ctx context.Context, ch Change, colls map[string]cachedCollection, now time.Time) (store.Write, *job.Definition, error) {
	type checkedWrite struct {
		w   store.Write
		def *job.Definition
	}
	r, err := recovery.Call(func() (checkedWrite, error) {
		w, def, err := s.write(ctx, ch, colls, now)
		return checkedWrite{w, def}, err
	})
	if p, ok := errors.AsType[*recovery.Panic](err); ok {
		p.Log(s.log, "check of a job definition", "collection", ch.Collection, "job", ch.Name)
		return store.Write{}, nil, &Error{Status: 500, Code: CodeInternal, Message: "the planner failed to check this definition, which was not stored: " +
			err.Error()}
	}
	return r.w, r.def, err
}

// write checks one change and makes its store write. A put's definition comes back once
// decoded, refused or not (its secrets sealed once it is written): the intake needs to know
// whether a refused one held secrets, the API replies with it.
func (s *Service) write(ctx context.Context, ch Change, colls map[string]cachedCollection, now time.Time) (store.Write, *job.Definition, error) {
	if err := checkNames(ch.Collection, ch.Name); err != nil {
		return store.Write{}, nil, err
	}
	if ch.Delete {
		return store.Write{Delete: &store.DeleteJob{Collection: ch.Collection, Name: ch.Name, Stamp: ch.Stamp, At: now}}, nil, nil
	}
	def, err := ch.Decoded, error(nil)
	if def == nil {
		if def, err = s.validator.Decode(ch.Raw); err != nil {
			return store.Write{}, nil, invalid(err)
		}
	}
	coll, ok := colls[ch.Collection]
	if !ok {
		if coll, err = s.checkedCollection(ctx, ch.Collection); err != nil {
			var apiErr *Error
			if !errors.As(err, &apiErr) {
				return store.Write{}, def, err // Redis: a failure, not a refusal
			}
		}
		colls[ch.Collection] = coll
	}
	if coll.coll == nil {
		return store.Write{}, def, notFound("job collection %s not found: create it first", ch.Collection)
	}
	put, err := s.prepare(coll.coll, ch.Collection, ch.Name, def.Properties, now)
	if errors.As(err, new(refusedByCollection)) && coll.kept {
		if coll, err = s.freshCollection(ctx, ch.Collection); err != nil {
			return store.Write{}, def, err
		}
		colls[ch.Collection] = coll
		put, err = s.prepare(coll.coll, ch.Collection, ch.Name, def.Properties, now)
	}
	if err != nil {
		return store.Write{}, def, err
	}
	put.Stamp, put.CreateOnly, put.CollectionGeneration = ch.Stamp, ch.CreateOnly, coll.generation
	return store.Write{Put: &put}, def, nil
}

// recheck checks again the puts Redis refused because their collection was written after
// they were checked (a kept collection, or one changed between the read and the write),
// against the collection read anew, and writes those it allows again, replacing their
// results. They keep their order: a generation once passed never comes back, so they are the
// last of their collection in the batch, and changes to one job still apply in order. One
// refused again for the same reason keeps that refusal (a Conflict: retry).
func (s *Service) recheck(ctx context.Context, writes []store.Write, props []*job.Properties, results []store.Applied, now time.Time) {
	var again []store.Write
	var at []int
	fresh := map[string]cachedCollection{}
	for k, a := range results {
		if !errors.Is(a.Err, store.ErrCollectionChanged) {
			continue
		}
		put := writes[k].Put
		coll, ok := fresh[put.Collection]
		if !ok {
			var err error
			if coll, err = s.freshCollection(ctx, put.Collection); err != nil {
				results[k].Err = err
				continue
			}
			fresh[put.Collection] = coll
		}
		if _, err := compileIn(coll.coll, *props[k], now); err != nil {
			results[k].Err = err
			continue
		}
		put.CollectionGeneration = coll.generation
		again = append(again, writes[k])
		at = append(at, k)
	}
	if len(again) == 0 {
		return
	}
	for j, a := range s.store.Apply(ctx, again) {
		results[at[j]] = a
	}
}

// applied tells the world about a change that was made, or that a published one was not, a
// later one having been applied before it: its publisher waits for the word on its own
// message. The last message applied, delivered again, was told of already. It answers whether
// the job is due soon, for its partition's planner to look now (Apply wakes it once a batch).
func (s *Service) applied(ch Change, w store.Write, a store.Applied) (wake bool) {
	if a.Stale {
		if !a.Again && ch.Stamp.Seq != 0 {
			s.emit(bus.Event{Kind: bus.EventSuperseded, Collection: ch.Collection, Job: ch.Name, Time: s.now().UTC(),
				IntakeSequence: ch.Stamp.Seq})
		}
		return false
	}
	if ch.Delete {
		// A published delete of a job that did not exist is reported too (NotFound): its
		// publisher waits for the word on its own message.
		if !a.Created && ch.Stamp.Seq == 0 {
			return false
		}
		s.emit(bus.Event{Kind: bus.EventDeleted, Collection: ch.Collection, Job: ch.Name, Time: s.now().UTC(),
			IntakeSequence: ch.Stamp.Seq, NotFound: !a.Created})
		return false
	}
	e := bus.Event{Kind: bus.EventAccepted, Collection: ch.Collection, Job: ch.Name, Time: s.now().UTC(), IntakeSequence: ch.Stamp.Seq}
	if a.Due {
		next := w.Put.Next.UTC()
		e.NextExecutionTime = &next
	}
	s.emit(e)
	return s.dueSoon(w.Put, a)
}

// dueSoon reports whether a job just put is due soon enough for its partition's planner to
// look now rather than at its next planned look.
func (s *Service) dueSoon(put *store.PutJob, a store.Applied) bool {
	return a.Due && put.Next.Sub(s.now()) < s.wakeWithin
}
