// Package jobs holds the operations on collections and jobs that the NATS API and the intake
// stream share: validation, quotas, when a schedule is (re)accepted, enabling and disabling,
// and the events that tell the world about it. It keeps no state (Redis, package store, does)
// beyond the API's puts in flight, which it writes in batches.
package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/internal/secrets"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/jobschema"
)

// Publisher sends an event (core NATS publish is enough: events are notifications).
type Publisher interface {
	Publish(subject string, data []byte) error
}

// Waker tells the planner that dispatches a partition of changes to its due set: a job due
// soon, to look at now (Wake), or jobs changed (store.Member of each, or of a collection with
// no job name for all its jobs), whose occurrences read before the change it does not send
// (Changed).
type Waker interface {
	Wake(partition int)
	Changed(partition int, jobs []string)
}

// Runner fires one occurrence of a job now, outside its schedule ("run now").
type Runner interface {
	RunNow(ctx context.Context, collection, job string) error
}

// Purger removes from the due stream what a deleted job or collection still had there: every
// message of a subject (a collection's), or those of one incarnation of a job (a job put again
// under the name keeps its own).
type Purger interface {
	PurgeDue(ctx context.Context, subject string) error
	PurgeIncarnation(ctx context.Context, subject string, incarnation int64) error
}

// Service implements the operations. It is safe for concurrent use.
type Service struct {
	store      *store.Store
	validator  *jobschema.Validator
	events     Publisher
	runner     Runner
	purger     Purger
	waker      Waker
	wakeWithin time.Duration
	subjects   bus.Subjects
	keys       *secrets.Keyring
	now        func() time.Time
	wall       func() time.Time // Config.Wall
	log        *slog.Logger
	puts       *putBatcher // the API's puts in flight
	// collections are the ones puts were checked against lately (collectioncache.go).
	collections *collectionCache
}

// Config gathers a Service's dependencies.
type Config struct {
	Store     *store.Store
	Validator *jobschema.Validator
	Events    Publisher
	Runner    Runner
	// Purger, when set, removes what the due stream holds for a job or collection deleted.
	Purger Purger
	// Waker, when set, is told about jobs due within WakeWithin of their put, so that the
	// planner dispatching their partition looks at once rather than at its next idle check.
	Waker      Waker
	WakeWithin time.Duration
	Subjects   bus.Subjects
	// Keys seal the secrets of definitions before they are stored; nil leaves them clear.
	Keys  *secrets.Keyring
	Clock func() time.Time
	// Wall is the real time, against which a request's deadline is read (time.Now when nil;
	// Clock may be a schedule's test clock far from it).
	Wall   func() time.Time
	Logger *slog.Logger
}

// New returns a Service.
func New(c Config) *Service {
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Wall == nil {
		c.Wall = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{store: c.Store, validator: c.Validator, events: c.Events, runner: c.Runner, purger: c.Purger,
		waker: c.Waker, wakeWithin: c.WakeWithin, subjects: c.Subjects, keys: c.Keys, now: c.Clock, wall: c.Wall, log: c.Logger,
		puts: newPutBatcher(), collections: newCollectionCache()}
}

// wake tells the dispatcher of a collection's partition to look now.
func (s *Service) wake(c string) {
	if s.waker != nil {
		s.waker.Wake(s.store.PartitionOf(c))
	}
}

// changed tells the planner dispatching c's partition that job j of c changed (put again,
// patched, deleted), or every job of c when j is "" (disabled, deleted): an occurrence it read
// before and holds for its time (the lookahead) is not sent, so that nothing fires after the
// change is answered.
func (s *Service) changed(c, j string) {
	if s.waker != nil {
		s.waker.Changed(s.store.PartitionOf(c), []string{store.Member(c, j)})
	}
}

// purgeCollection removes what the due stream still holds for a collection just deleted,
// disabled or suspended: its jobs' retries waiting for their interval, their error actions,
// occurrences not yet delivered. Without it a deleted job went on calling its target until its
// retries ran out, and a job put again under its name was handed the old one's retries, their
// results landing in its history; a job disabled because its target failed made 4 more calls
// over 2 minutes with the default policy. An attempt under way at a worker ends as it is, with
// no retry: its message is gone. A failure is logged (the change itself is done) and answered
// false: the change's record stays, for a planner to purge again (FinishStale).
func (s *Service) purgeCollection(ctx context.Context, c string) bool {
	if s.purger == nil {
		return true
	}
	if err := s.purger.PurgeDue(ctx, s.subjects.DueOf(c)); err != nil {
		s.log.Warn("what the due stream holds for a deleted or disabled collection could not be removed yet: its jobs' retries may still run until a planner removes them",
			"collection", c, "error", err)
		return false
	}
	return true
}

// purgeJob is purgeCollection for a job deleted or disabled: it removes what the due stream still
// holds for the job's incarnation, then ends the delete's or disable's record of it. A purge
// that fails is answered, and leaves the record for a planner to purge again (FinishStale).
func (s *Service) purgeJob(ctx context.Context, p store.Purge) error {
	if s.purger == nil {
		return nil
	}
	if err := s.purger.PurgeIncarnation(ctx, s.subjects.Due(p.Collection, p.Job), p.Incarnation); err != nil {
		return fmt.Errorf("remove the messages of job %s/%s (deleted or disabled) from the due stream: %w", p.Collection, p.Job, err)
	}
	if err := s.store.EndPurge(ctx, p); err != nil {
		s.log.Info("a deleted or disabled job's purge stays recorded until a planner ends it", "collection", p.Collection, "job", p.Job, "error", err)
	}
	return nil
}

// purgeStopped is purgeJob for a job just deleted or disabled: a failure is logged, the change
// itself done.
func (s *Service) purgeStopped(ctx context.Context, p store.Purge) {
	if err := s.purgeJob(ctx, p); err != nil {
		s.log.Warn("what the due stream holds for a deleted or disabled job could not be removed yet: its retries may still run until a planner removes them",
			"error", err)
	}
}

// emit publishes an event; a lost event is logged, never an error for the caller: the change
// it reports is already stored.
func (s *Service) emit(e bus.Event) {
	if s.events == nil {
		return
	}
	err := s.events.Publish(s.subjects.Event(e.Collection, e.Job, e.Kind), bus.AppendEvent(nil, e))
	if err != nil {
		s.log.Warn("publish event", "kind", e.Kind, "collection", e.Collection, "job", e.Job, "error", err)
	}
}

// Page is a page of a listing and the request for the next one, if any.
type Page[T any] struct {
	Value    []T          `json:"value"`
	NextLink *PageRequest `json:"nextLink,omitempty"`
	// Count is how many the whole listing holds, where that is cheap to know (collections).
	Count *int `json:"count,omitempty"`
}

// PageRequest asks for part of a listing; a listing's nextLink is one, to send back as it is.
type PageRequest struct {
	Top  int `json:"top,omitempty"`  // 0: the default page size
	Skip int `json:"skip,omitempty"` // items to pass over (costs the items passed over when filtered)
	// After continues a listing after the last item of the previous page (a cursor): each page
	// then costs the same at any depth.
	After string `json:"after,omitempty"`
	// State and Status are the filters of the job and history listings, kept in nextLink.
	State  string `json:"state,omitempty"`
	Status string `json:"status,omitempty"`
}

// pageSize is a request's page size within the bounds.
func pageSize(top int) int {
	switch {
	case top <= 0:
		return DefaultPageSize
	case top > MaxPageSize:
		return MaxPageSize
	}
	return top
}

// DefaultPageSize and MaxPageSize bound listings.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

func page[T any](all []T, r PageRequest) Page[T] {
	top := pageSize(r.Top)
	skip := min(max(r.Skip, 0), len(all))
	end := min(skip+top, len(all))
	p := Page[T]{Value: all[skip:end]}
	if p.Value == nil {
		p.Value = []T{}
	}
	if end < len(all) {
		p.NextLink = &PageRequest{Top: top, Skip: end}
	}
	return p
}
