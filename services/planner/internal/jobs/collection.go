package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// PutCollection creates or replaces a job collection (only creates it when createOnly is set:
// an existing collection is a Conflict). Putting it in another state enables or disables it as
// EnableCollection and DisableCollection do.
func (s *Service) PutCollection(ctx context.Context, c string, raw []byte, createOnly bool) (*job.Collection, bool, error) {
	if err := bus.CheckName("collection", c); err != nil {
		return nil, false, badRequest("%v", err)
	}
	coll, err := s.validator.DecodeCollection(raw)
	if err != nil {
		return nil, false, invalid(err)
	}
	coll.ID, coll.Type, coll.Name, coll.JobCount = "/jobCollections/"+c, "Microsoft.Scheduler/jobCollections", c, nil
	if err := applyPlan(&coll.Properties); err != nil {
		return nil, false, err
	}
	state := coll.Properties.State
	if state == "" {
		state = job.CollectionEnabled
	}
	coll.Properties.State = state
	maxJobs := 0
	if q := coll.Properties.Quota; q != nil {
		maxJobs = q.MaxJobCount
	}
	old, err := s.store.GetCollection(ctx, c)
	oldState := job.CollectionEnabled
	switch {
	case err == nil && createOnly:
		return nil, false, conflict("job collection %s already exists: update it, or put it to replace it", c)
	case err == nil:
		oldState = old.State
		if sku := coll.Properties.Sku; sku != nil && sku.Name == job.SkuFree {
			if err := s.checkDowngrade(ctx, c, coll); err != nil {
				return nil, false, err
			}
		}
	case !errors.Is(err, store.ErrNotFound):
		return nil, false, err
	}
	def, err := json.Marshal(coll)
	if err != nil {
		return nil, false, fmt.Errorf("encode collection: %w", err)
	}
	// Stored with its old state, so that a state change goes through setState below.
	created, err := s.store.PutCollection(ctx, c, def, oldState, maxJobs, createOnly)
	s.collections.forget(c) // not needed (puts check its generation), but spares them a refusal
	if errors.Is(err, store.ErrExists) {
		return nil, false, conflict("job collection %s already exists: update it, or put it to replace it", c)
	}
	if errors.Is(err, store.ErrDeleting) {
		return nil, false, deleting(c)
	}
	if err != nil {
		return nil, false, err
	}
	if state != oldState {
		if err := s.setState(ctx, c, state); err != nil {
			return nil, false, err
		}
	}
	got, err := s.GetCollection(ctx, c)
	return got, created, err
}

// GetCollection returns a collection.
func (s *Service) GetCollection(ctx context.Context, c string) (*job.Collection, error) {
	coll, err := s.collection(ctx, c)
	if err != nil {
		return nil, err
	}
	return coll, nil
}

// collection reads a collection with its current state.
func (s *Service) collection(ctx context.Context, c string) (*job.Collection, error) {
	e, err := s.readCollection(ctx, c)
	return e.coll, err
}

// readCollection reads a collection with its generation.
func (s *Service) readCollection(ctx context.Context, c string) (cachedCollection, error) {
	rec, err := s.store.GetCollection(ctx, c)
	if errors.Is(err, store.ErrNotFound) {
		return cachedCollection{}, notFound("job collection %s not found", c)
	}
	if err != nil {
		return cachedCollection{}, err
	}
	coll, err := collectionFrom(rec)
	if err != nil {
		return cachedCollection{}, err
	}
	return cachedCollection{coll: coll, generation: rec.Generation, read: s.now()}, nil
}

// collectionFrom is the collection resource of a stored record, with its state and job count.
func collectionFrom(rec *store.Collection) (*job.Collection, error) {
	var coll job.Collection
	if err := json.Unmarshal(rec.Definition, &coll); err != nil {
		return nil, fmt.Errorf("decode stored collection %s: %w", rec.Name, err)
	}
	coll.Properties.State = rec.State
	n := rec.JobCount
	coll.JobCount = &n
	return &coll, nil
}

// checkedCollection is the collection a put is checked against: the one kept, else the one
// read, then kept (only puts use what is kept, and never change it).
func (s *Service) checkedCollection(ctx context.Context, c string) (cachedCollection, error) {
	if e, ok := s.collections.get(c, s.now()); ok {
		return e, nil
	}
	return s.freshCollection(ctx, c)
}

// freshCollection reads a collection for the puts and keeps it in place of the one kept.
func (s *Service) freshCollection(ctx context.Context, c string) (cachedCollection, error) {
	s.collections.forget(c)
	e, err := s.readCollection(ctx, c)
	if err == nil {
		s.collections.put(c, e)
	}
	return e, err
}

// ListCollections lists the collections by name, from after r.After (a cursor). Its nextLink
// is a cursor too: a collection created or deleted between two pages moves no other from
// one page to the next, as an offset would.
func (s *Service) ListCollections(ctx context.Context, r PageRequest) (Page[*job.Collection], error) {
	// The names the page needs and one more, which says whether a next page follows.
	names, count, err := s.store.CollectionNamesAfter(ctx, r.After, max(r.Skip, 0)+pageSize(r.Top)+1)
	if err != nil {
		return Page[*job.Collection]{}, err
	}
	p := page(names, r)
	if p.NextLink != nil {
		p.NextLink = &PageRequest{Top: p.NextLink.Top, After: p.Value[len(p.Value)-1]}
	}
	// One round trip for the page; a collection deleted since its name was read is left out
	// (read one by one, it failed the whole listing with its 404).
	recs, err := s.store.GetCollections(ctx, p.Value)
	if err != nil {
		return Page[*job.Collection]{}, err
	}
	out := Page[*job.Collection]{Value: make([]*job.Collection, 0, len(recs)), NextLink: p.NextLink, Count: &count}
	for _, rec := range recs {
		coll, err := collectionFrom(rec)
		if err != nil {
			return Page[*job.Collection]{}, err
		}
		out.Value = append(out.Value, coll)
	}
	return out, nil
}

// collectionWork bounds a collection's state change or deletion, which goes on when its
// request's client gives up (the API's own bound is 30 s): cut short, it would leave some jobs
// done and others not (those of an enabled collection out of the due set until it is enabled
// again).
const collectionWork = 10 * time.Minute

// outlast is a context for a collection's state change or deletion: not ended with the
// request's, bounded by collectionWork.
func outlast(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), collectionWork)
}

// DeleteCollection deletes a collection and every job in it. A large collection's delete takes
// several calls; if this planner stops before the last, another finishes it (FinishStale).
func (s *Service) DeleteCollection(ctx context.Context, c string) error {
	ctx, cancel := outlast(ctx)
	defer cancel()
	ok, err := s.deleteCollection(ctx, c, false)
	if err != nil {
		return err
	}
	if !ok {
		return notFound("job collection %s not found", c)
	}
	return nil
}

// deleteCollection deletes c, reporting whether it was there, then removes what the due stream
// holds of it and ends the delete's record; a purge that fails leaves the record, for a planner
// to purge again (FinishStale). Taken up from a planner that stopped (gone), the collection may
// be deleted already, its messages still on the due stream.
func (s *Service) deleteCollection(ctx context.Context, c string, gone bool) (bool, error) {
	defer s.collections.forget(c)
	ok, err := s.store.DeleteCollection(ctx, c, s.now())
	if err != nil || !(ok || gone) {
		return ok, err
	}
	s.changed(c, "")
	if s.purgeCollection(ctx, c) {
		if err := s.store.EndDelete(ctx, c); err != nil {
			s.log.Info("a deleted collection's record stays until a planner ends it", "collection", c, "error", err)
		}
	}
	return ok, nil
}

// EnableCollection resumes every enabled job of the collection at its next time after now,
// with no immediate run for the times that passed while it was disabled.
func (s *Service) EnableCollection(ctx context.Context, c string) (*job.Collection, error) {
	return s.changeState(ctx, c, job.CollectionEnabled)
}

// DisableCollection pauses every job of the collection.
func (s *Service) DisableCollection(ctx context.Context, c string) (*job.Collection, error) {
	return s.changeState(ctx, c, job.CollectionDisabled)
}

func (s *Service) changeState(ctx context.Context, c string, state job.CollectionState) (*job.Collection, error) {
	if _, err := s.collection(ctx, c); err != nil {
		return nil, err
	}
	if err := s.setState(ctx, c, state); err != nil {
		return nil, err
	}
	return s.collection(ctx, c)
}

// setState enables or disables a collection, going through its jobs a chunk at a time (the
// store's calls). Enabling resumes each Enabled job at its next time after now (Completed when
// its series ran out meanwhile): the store answers each chunk's jobs not in the due set, and
// the next call schedules them. A job put once the state is set schedules itself, by the
// collection's state; one changed between a chunk's read and its scheduling is skipped by its
// version, its put having scheduled it. A change overtaken by another (a disable while this
// enables, a delete) stops: the other carries on. If this planner stops before the end,
// another finishes the change (FinishStale).
func (s *Service) setState(ctx context.Context, c string, state job.CollectionState) error {
	ctx, cancel := outlast(ctx)
	defer cancel()
	err := s.stepState(ctx, c, store.StateChange{State: state})
	if errors.Is(err, store.ErrDeleting) {
		return deleting(c)
	}
	return err
}

// stepState makes the calls of a state change from ch, its first or one taken up, to its end.
func (s *Service) stepState(ctx context.Context, c string, ch store.StateChange) error {
	state := ch.State
	for {
		ch.At = s.now()
		step, err := s.store.SetCollectionState(ctx, c, ch)
		if err != nil || step.Overtaken {
			return err
		}
		ch.Schedule = nil
		if state == job.CollectionEnabled {
			if ch.Schedule, err = s.resumable(ctx, c, step.Unscheduled); err != nil {
				return err
			}
		}
		if step.Done && len(ch.Schedule) == 0 {
			if state == job.CollectionEnabled {
				s.wake(c)
				return nil
			}
			s.changed(c, "")
			if !s.purgeCollection(ctx, c) {
				return nil
			}
			if err := s.store.EndChange(ctx, c, state); err != nil {
				s.log.Info("a disabled collection's record stays until a planner ends it", "collection", c, "error", err)
			}
			return nil
		}
		ch.Then, ch.After = true, step.Last
	}
}

// resumable computes the next time after now of each Enabled job among names.
func (s *Service) resumable(ctx context.Context, c string, names []string) ([]store.Reschedule, error) {
	if len(names) == 0 {
		return nil, nil
	}
	members := make([]string, len(names))
	for i, n := range names {
		members[i] = store.Member(c, n)
	}
	recs, err := s.store.LoadJobs(ctx, members)
	if err != nil {
		return nil, err
	}
	now := s.now()
	var out []store.Reschedule
	for _, rec := range recs {
		if rec == nil || rec.State != job.StateEnabled {
			continue
		}
		p, _, err := SplitBlob(rec.Definition) // the schedule alone: the action is not needed
		if err != nil {
			return nil, err
		}
		sched, err := Compile(p, rec.Accepted)
		if err != nil {
			return nil, err
		}
		r := store.Reschedule{Name: rec.Name, Version: rec.Version}
		if o := sched.Next(now, rec.Fired); !o.Done {
			r.Next = o.Time
		}
		out = append(out, r)
	}
	return out, nil
}
