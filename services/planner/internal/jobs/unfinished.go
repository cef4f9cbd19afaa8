package jobs

import (
	"context"
	"fmt"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// staleChangesRead bounds the stale changes read from each partition at a time.
const staleChangesRead = 16

// FinishStale finishes the collections' state changes and deletes whose planner stopped before
// the end (killed, cut off from Redis, or past collectionWork), found by their last call
// bus.StaleChangeAfter ago or more: left so, an enabled collection's jobs not yet gone through
// would never fire, a disabled one's would fire once more, and a deleted one's retries and
// error actions waiting on the due stream would still run. So are the deleted or disabled jobs
// whose messages were left on the due stream bus.StalePurgeAfter ago or more (purgeJob). It
// answers how many it finished. Another planner taking a change up at the same time is left it
// (store.TakeChange); a change whose planner was only slow is finished twice, which leaves it
// as once.
func (s *Service) FinishStale(ctx context.Context) (int, error) {
	n, err := s.finishPurges(ctx)
	if err != nil {
		return n, err
	}
	stale, err := s.store.Changes(ctx, s.now().Add(-bus.StaleChangeAfter), staleChangesRead)
	if err != nil {
		return n, err
	}
	for _, seen := range stale {
		ch, ok, err := s.store.TakeChange(ctx, seen, s.now())
		if err != nil {
			return n, err
		}
		if !ok {
			continue
		}
		s.log.Info("finishing a collection's change that its planner left unfinished",
			"collection", ch.Collection, "change", ch.Kind, "last_step", seen.Last)
		if err := s.finish(ctx, ch); err != nil {
			return n, fmt.Errorf("finish the change %s of collection %s: %w", ch.Kind, ch.Collection, err)
		}
		n++
	}
	return n, nil
}

// finishPurges removes from the due stream the messages of the jobs deleted or disabled
// bus.StalePurgeAfter ago or more that their planner left there (killed between the change
// and the purge, or NATS not answering). It stops at a purge that fails: NATS does not answer,
// and the others wait for the next look rather than each fail alike.
func (s *Service) finishPurges(ctx context.Context) (int, error) {
	stale, err := s.store.Purges(ctx, s.now().Add(-bus.StalePurgeAfter), staleChangesRead)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, seen := range stale {
		p, ok, err := s.store.TakePurge(ctx, seen, s.now())
		if err != nil {
			return n, err
		}
		if !ok {
			continue
		}
		s.log.Info("removing a deleted or disabled job's messages from the due stream, which its planner left there",
			"collection", p.Collection, "job", p.Job, "since", seen.Since)
		if err := s.purgeJob(ctx, p); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// finish goes on with a change from where its calls recorded they were.
func (s *Service) finish(ctx context.Context, ch store.Change) error {
	if ch.Kind == store.ChangeDelete {
		_, err := s.deleteCollection(ctx, ch.Collection, true)
		return err
	}
	return s.stepState(ctx, ch.Collection, store.StateChange{State: job.CollectionState(ch.Kind), Then: true, After: ch.From})
}
