package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/resched/resched/services/planner/internal/store"
)

// Resealed counts what Reseal did.
type Resealed struct {
	Jobs     int // jobs looked at
	Resealed int // jobs whose secrets were sealed again
}

// resealChunk is how many jobs Reseal reads per round trip.
const resealChunk = 500

// Reseal seals again, with the newest key, the secrets of every stored job that rest in clear
// or under an older key, so the older key can be retired. Each job is rewritten with a
// compare-and-set that keeps its schedule, state and counts; a job that changes meanwhile is
// read again.
func (s *Service) Reseal(ctx context.Context) (Resealed, error) {
	var n Resealed
	if s.keys == nil {
		return n, errors.New("no secret keys are configured: there is nothing to seal with (RESCHED_SECRET_KEYS_FILE)")
	}
	colls, err := s.store.CollectionNames(ctx)
	if err != nil {
		return n, err
	}
	for _, c := range colls {
		names, err := s.store.JobNames(ctx, c)
		if err != nil {
			return n, err
		}
		for len(names) > 0 {
			chunk := names[:min(resealChunk, len(names))]
			names = names[len(chunk):]
			if err := s.resealChunk(ctx, c, chunk, &n); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (s *Service) resealChunk(ctx context.Context, c string, names []string, n *Resealed) error {
	members := make([]string, len(names))
	for i, name := range names {
		members[i] = store.Member(c, name)
	}
	recs, err := s.store.LoadJobs(ctx, members)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		for attempt := 0; rec != nil; attempt++ {
			done, err := s.resealOne(ctx, rec)
			if err == nil {
				n.Jobs++
				if done {
					n.Resealed++
				}
				break
			}
			if !errors.Is(err, store.ErrConflict) || attempt == 10 {
				return fmt.Errorf("re-seal job %s/%s: %w", rec.Collection, rec.Name, err)
			}
			if rec, err = s.store.GetJob(ctx, rec.Collection, rec.Name); errors.Is(err, store.ErrNotFound) {
				rec = nil // deleted meanwhile: nothing left to seal
			} else if err != nil {
				return err
			}
		}
	}
	return nil
}

// resealOne rewrites one job if its secrets are stale; it reports whether it did.
func (s *Service) resealOne(ctx context.Context, rec *store.Job) (bool, error) {
	p, err := DecodeBlob(rec.Definition)
	if err != nil {
		return false, err
	}
	if !s.keys.Stale(p.Action) {
		return false, nil
	}
	if p, err = s.decodeOpen(rec); err != nil {
		return false, err
	}
	blob, err := s.encode(rec.Collection, rec.Name, p)
	if err != nil {
		return false, err
	}
	_, _, _, err = s.store.PutJob(ctx, store.PutJob{Collection: rec.Collection, Name: rec.Name, Definition: blob,
		Accepted: rec.Accepted, Next: rec.Next, State: rec.State, IfVersion: rec.Version, IfNext: &rec.Next})
	return err == nil, err
}
