package jobs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/recurrence"
)

// PutJob creates or replaces a job (only creates it when createOnly is set: an existing job is
// a Conflict). Its schedule is (re)accepted now (docs/recurrence.md §7): a new anchor when it has no
// startTime, and the count starts again; status counters stay.
func (s *Service) PutJob(ctx context.Context, c, j string, raw []byte, createOnly bool) (*job.Definition, bool, error) {
	if err := checkNames(c, j); err != nil {
		return nil, false, err
	}
	// Decoded here, in the caller's goroutine, so that the puts of a batch are decoded side
	// by side rather than one after another by the caller applying the batch.
	def, err := s.validator.Decode(raw)
	if err != nil {
		err = invalid(err)
		s.rejected(c, j, 0, err)
		return nil, false, err
	}
	p := &pendingPut{change: Change{Collection: c, Name: j, Decoded: def, CreateOnly: createOnly}, done: make(chan struct{})}
	s.puts.put(ctx, s, p)
	return p.def, p.created, p.err
}

// store1 validates a definition against its collection and stores it, re-accepting its
// schedule now. ifVersion > 0 makes the write a compare-and-set. Errors of the store come back
// as they are (the caller retries ErrConflict or maps them with storeError).
func (s *Service) store1(ctx context.Context, c, j string, p job.Properties, ifVersion int64, createOnly bool) (bool, error) {
	coll, err := s.collection(ctx, c)
	if err != nil {
		return false, err
	}
	put, err := s.prepare(coll, c, j, p, s.now())
	if err != nil {
		return false, err
	}
	put.IfVersion, put.CreateOnly = ifVersion, createOnly
	return s.putStored(ctx, put)
}

// prepare checks a definition against its collection and makes its write, re-accepting the
// schedule at now: the state, the next time, the stored form with the secrets sealed.
func (s *Service) prepare(coll *job.Collection, c, j string, p job.Properties, now time.Time) (store.PutJob, error) {
	if !p.State.ClientSettable() {
		return store.PutJob{}, badRequest("state: only Enabled or Disabled may be set; %s is the scheduler's to set", p.State)
	}
	if err := certificates(&p); err != nil {
		return store.PutJob{}, err
	}
	sched, err := compileIn(coll, p, now)
	if err != nil {
		return store.PutJob{}, err
	}
	put := store.PutJob{Collection: c, Name: j, Accepted: now, At: now, State: job.StateEnabled, Reaccept: true}
	if p.State == job.StateDisabled {
		put.State = job.StateDisabled
	} else if first := sched.First(); first.Done {
		put.State = job.StateCompleted // e.g. an endTime already past: accepted, never runs
	} else {
		put.Next = first.Time
	}
	if put.Definition, err = s.encode(c, j, p); err != nil {
		return store.PutJob{}, err
	}
	return put, nil
}

// compileIn compiles a job's schedule and checks the job against what its collection allows:
// its plan and quota (a refusal of those is a refusedByCollection).
func compileIn(coll *job.Collection, p job.Properties, now time.Time) (*recurrence.Schedule, error) {
	if err := checkFreeJob(coll, p); err != nil {
		return nil, refusedByCollection{err}
	}
	sched, err := Compile(p, now)
	if err != nil {
		return nil, err
	}
	if err := checkMaxRecurrence(coll.Properties.Quota, sched, now); err != nil {
		return nil, refusedByCollection{err}
	}
	return sched, nil
}

// refusedByCollection is a refusal by the job's collection: its plan or quota. Against a kept
// collection, which may be stale, it is checked again against the collection read anew.
type refusedByCollection struct{ error }

func (r refusedByCollection) Unwrap() error { return r.error }

// putStored writes a job (a patch's) and wakes the planner that dispatches its partition when
// it is due soon, so a new job fires on time without any planner polling for it; a job it
// changed, that planner does not fire as it was read before (tellChanged), and a job it
// disabled leaves nothing waiting on the due stream (purgeAll), as after a batch's writes.
func (s *Service) putStored(ctx context.Context, put store.PutJob) (bool, error) {
	writes := []store.Write{{Put: &put}}
	results := s.store.Apply(ctx, writes)
	s.tellChanged(writes, results)
	s.purgeAll(ctx, writes, results)
	a := results[0]
	if a.Err == nil && s.dueSoon(&put, a) {
		s.wake(put.Collection)
	}
	return a.Created, a.Err
}

// GetJob returns a job, its secrets removed.
func (s *Service) GetJob(ctx context.Context, c, j string) (*job.Definition, error) {
	rec, err := s.store.GetJob(ctx, c, j)
	if err != nil {
		return nil, storeError(err, c, j)
	}
	return toDefinition(rec)
}

func toDefinition(rec *store.Job) (*job.Definition, error) {
	p, err := DecodeBlob(rec.Definition)
	if err != nil {
		return nil, err
	}
	return definition(rec, p), nil
}

// definition is the job rec, whose definition holds the properties stored (rec.Definition
// decoded, or what it was encoded from), with its secrets removed.
func definition(rec *store.Job, stored job.Properties) *job.Definition {
	p := job.Properties{StartTime: stored.StartTime, Recurrence: stored.Recurrence, Action: stored.Action}
	p.State = rec.State
	// A disabled job keeps its counts, so that a job disabled for failing still says how
	// often it failed (the gateway leaves the status out, as the original service did).
	st := &job.Status{ExecutionCount: rec.Executions, FailureCount: rec.Failures, FaultedCount: rec.Faults}
	if !rec.LastExecution.IsZero() {
		t := rec.LastExecution
		st.LastExecutionTime = &t
	}
	if !rec.Next.IsZero() && rec.State == job.StateEnabled {
		t := rec.Next
		st.NextExecutionTime = &t
	}
	p.Status = st
	d := &job.Definition{
		ID:   "/jobCollections/" + rec.Collection + "/jobs/" + rec.Name,
		Type: "Microsoft.Scheduler/jobCollections/jobs", Name: rec.Collection + "/" + rec.Name,
		Properties: p,
	}
	return d.Redacted()
}

// DeleteJob deletes a job and its history.
func (s *Service) DeleteJob(ctx context.Context, c, j string) error {
	if err := checkNames(c, j); err != nil {
		return err
	}
	purge, ok, err := s.store.DeleteJob(ctx, c, j, s.now())
	if err != nil {
		return err
	}
	if !ok {
		return notFound("job %s/%s not found", c, j)
	}
	s.changed(c, j)
	s.purgeStopped(ctx, purge)
	s.emit(bus.Event{Kind: bus.EventDeleted, Collection: c, Job: j, Time: s.now().UTC()})
	return nil
}

// filterScan is how many jobs a filtered or skipping listing reads in one request at most
// (about 100 ms at 10 µs a job).
const filterScan = 10_000

// ListJobs lists a collection's jobs by name, optionally only those in one state. Pages go by
// the collection's index: a page costs what it holds (plus the jobs a filter passes over, up
// to filterScan), at any depth; nextLink continues after the last name read.
func (s *Service) ListJobs(ctx context.Context, c string, state job.State, r PageRequest) (Page[*job.Definition], error) {
	if _, err := s.collection(ctx, c); err != nil {
		return Page[*job.Definition]{}, err
	}
	top := pageSize(r.Top)
	next := func(after string) *PageRequest { return &PageRequest{Top: top, After: after, State: string(state)} }
	out := Page[*job.Definition]{Value: []*job.Definition{}}
	if state == "" && r.After == "" {
		names, err := s.store.JobNamesAt(ctx, c, max(r.Skip, 0), top+1)
		if err != nil {
			return out, err
		}
		more := len(names) > top
		names = names[:min(len(names), top)]
		recs, err := s.loadJobs(ctx, c, names)
		if err != nil {
			return out, err
		}
		for _, rec := range recs {
			if rec != nil {
				if out.Value, err = appendDefinition(out.Value, rec); err != nil {
					return out, err
				}
			}
		}
		if more {
			out.NextLink = next(names[len(names)-1])
		}
		return out, nil
	}
	// A filter or a skip reads jobs it does not answer: at most filterScan a request, then the
	// page so far, short or empty, with a nextLink from the last job read (and what is left
	// to skip), so that no request holds a planner through a collection of a million jobs.
	after, toSkip := r.After, max(r.Skip, 0)
	chunk := max(top, DefaultPageSize)
	for scanned := 0; ; {
		if scanned >= filterScan {
			out.NextLink = next(after)
			out.NextLink.Skip = toSkip
			return out, nil
		}
		names, err := s.store.JobNamesAfter(ctx, c, after, chunk)
		if err != nil || len(names) == 0 {
			return out, err
		}
		scanned += len(names)
		recs, err := s.loadJobs(ctx, c, names)
		if err != nil {
			return out, err
		}
		for i, rec := range recs {
			after = names[i]
			if rec == nil || (state != "" && rec.State != state) {
				continue
			}
			if toSkip > 0 {
				toSkip--
				continue
			}
			if out.Value, err = appendDefinition(out.Value, rec); err != nil {
				return out, err
			}
			if len(out.Value) == top {
				if i < len(recs)-1 || len(names) == chunk {
					out.NextLink = next(after)
				}
				return out, nil
			}
		}
		if len(names) < chunk {
			return out, nil
		}
	}
}

func (s *Service) loadJobs(ctx context.Context, c string, names []string) ([]*store.Job, error) {
	members := make([]string, len(names))
	for i, n := range names {
		members[i] = store.Member(c, n)
	}
	return s.store.LoadJobs(ctx, members)
}

func appendDefinition(defs []*job.Definition, rec *store.Job) ([]*job.Definition, error) {
	d, err := toDefinition(rec)
	if err != nil {
		return defs, err
	}
	return append(defs, d), nil
}

// History lists a job's history, newest first, optionally only entries of one status. Pages
// go by position in the stored history; nextLink continues after the last entry read.
func (s *Service) History(ctx context.Context, c, j string, status job.ExecutionStatus, r PageRequest) (Page[job.HistoryEntry], error) {
	if _, err := s.store.GetJob(ctx, c, j); err != nil {
		return Page[job.HistoryEntry]{}, storeError(err, c, j)
	}
	top := pageSize(r.Top)
	out := Page[job.HistoryEntry]{Value: []job.HistoryEntry{}}
	pos, toSkip := max(r.Skip, 0), 0
	if r.After != "" {
		// "<position>.<mark>": where the next page starts, and the last entry of the page
		// before, found again deeper when entries were recorded since ("<position>" alone:
		// a cursor of an earlier release, taken as it is).
		at, mark, _ := strings.Cut(r.After, ".")
		p, err := strconv.Atoi(at)
		if err != nil || p < 0 {
			return out, badRequest("after: not a position this listing gave")
		}
		if mark != "" {
			if p, err = s.store.HistorySeek(ctx, c, j, p-1, mark); err != nil {
				return out, err
			}
			if p < 0 {
				return out, nil // the entry was trimmed, and everything older with it
			}
		}
		pos = p
	} else if status != "" {
		pos, toSkip = 0, max(r.Skip, 0)
	}
	chunk := max(top, DefaultPageSize)
	now := s.now()
	defer func() { store.SortHistory(out.Value) }()
	for {
		entries, marks, next, err := s.store.HistoryRange(ctx, c, j, pos, chunk, now)
		if err != nil {
			return out, err
		}
		for i, e := range entries {
			if status != "" && e.Status != status {
				continue
			}
			if toSkip > 0 {
				toSkip--
				continue
			}
			out.Value = append(out.Value, e)
			if len(out.Value) == top {
				if i < len(entries)-1 || next >= 0 {
					out.NextLink = &PageRequest{Top: top, After: strconv.Itoa(pos+i+1) + "." + marks[i], Status: string(status)}
				}
				return out, nil
			}
		}
		if next < 0 {
			return out, nil
		}
		pos = next
	}
}

// RunJob fires one occurrence of a job now, outside its schedule; the schedule is unchanged.
func (s *Service) RunJob(ctx context.Context, c, j string) error {
	if _, err := s.store.GetJob(ctx, c, j); err != nil {
		return storeError(err, c, j)
	}
	if s.runner == nil {
		return errors.New("run now is not available on this planner")
	}
	return s.runner.RunNow(ctx, c, j)
}

// rejected announces a definition refused for a reason the client can fix, with its intake
// sequence when it was published (0 through the API). Internal errors (Redis down) are not
// rejections: the intake retries them and may still accept the job.
func (s *Service) rejected(c, j string, seq uint64, err error) {
	var apiErr *Error
	if !errors.As(err, &apiErr) {
		return
	}
	e := bus.Event{Kind: bus.EventRejected, Collection: c, Job: j, Time: s.now().UTC(), IntakeSequence: seq, Errors: apiErr.Details}
	if len(e.Errors) == 0 {
		e.Errors = []bus.ErrorEntry{{Message: apiErr.Message}}
	}
	s.emit(e)
}

func nextOf(d *job.Definition) *time.Time {
	if d.Properties.Status == nil {
		return nil
	}
	return d.Properties.Status.NextExecutionTime
}

func checkNames(c, j string) error {
	if err := bus.CheckName("collection", c); err != nil {
		return badRequest("%v", err)
	}
	if err := bus.CheckName("job", j); err != nil {
		return badRequest("%v", err)
	}
	return nil
}

// storeError turns the store's errors into errors a client can act on.
func storeError(err error, c, j string) error {
	var q store.QuotaError
	var apiErr *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &apiErr):
		return apiErr
	case errors.Is(err, store.ErrNoCollection):
		return notFound("job collection %s not found: create it first", c)
	case errors.Is(err, store.ErrDeleting):
		return deleting(c)
	case errors.Is(err, store.ErrCollectionChanged):
		return conflict("job collection %s changed while job %s was put; retry it", c, j)
	case errors.Is(err, store.ErrNotFound):
		return notFound("job %s/%s not found", c, j)
	case errors.As(err, &q):
		return conflict("The job collection has reached its quota of '%d'. Please remove existing jobs before adding new ones.", q.Max)
	case errors.Is(err, store.ErrConflict):
		return conflict("job %s/%s changed while this request ran; retry it", c, j)
	case errors.Is(err, store.ErrExists):
		return conflict("job %s/%s already exists: update it, or put it to replace it", c, j)
	}
	return fmt.Errorf("job %s/%s: %w", c, j, err)
}
