package jobs

import (
	"errors"
	"fmt"

	"github.com/resched/resched/services/internal/secrets"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
)

// encode is the stored form of a job's definition with its secrets sealed by the planner's
// keyring (left clear without one). It seals p's action in place: callers store p and drop it.
func (s *Service) encode(c, j string, p job.Properties) ([]byte, error) {
	if err := s.keys.SealAction(p.Action, c, j); err != nil {
		if errors.Is(err, secrets.ErrReserved) {
			return nil, badRequest("%v", err)
		}
		return nil, fmt.Errorf("job %s/%s: %w", c, j, err)
	}
	return EncodeBlob(p)
}

// decodeOpen reads a stored definition with its secrets opened, for the changes that keep
// the ones a client does not send again (a patch).
func (s *Service) decodeOpen(rec *store.Job) (job.Properties, error) {
	p, err := DecodeBlob(rec.Definition)
	if err != nil {
		return p, err
	}
	if err := s.keys.OpenAction(p.Action, rec.Collection, rec.Name); err != nil {
		return p, fmt.Errorf("job %s/%s: its stored secrets do not open (%w); give the planner the key they were sealed with", rec.Collection, rec.Name, err)
	}
	return p, nil
}
