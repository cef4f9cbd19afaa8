package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"time"

	"github.com/resched/resched/services/internal/bus"
	"github.com/resched/resched/services/planner/internal/store"
	"github.com/resched/resched/shared/job"
	"github.com/resched/resched/shared/jobschema"
)

// PatchJob merges a partial definition into a job, deeply, as the original service did (a
// null removes a field). A change of startTime or recurrence re-accepts the schedule now;
// any other change, enabling and disabling included, keeps the anchor and the count.
func (s *Service) PatchJob(ctx context.Context, c, j string, raw []byte) (*job.Definition, error) {
	if err := checkNames(c, j); err != nil {
		return nil, err
	}
	for range 3 { // a concurrent change makes the compare-and-set fail: read and merge again
		err := s.patchOnce(ctx, c, j, raw)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			err = storeError(err, c, j)
			s.rejected(c, j, 0, err)
			return nil, err
		}
		got, err := s.GetJob(ctx, c, j)
		if err != nil {
			return nil, err
		}
		s.emit(bus.Event{Kind: bus.EventAccepted, Collection: c, Job: j, Time: s.now().UTC(), NextExecutionTime: nextOf(got)})
		return got, nil
	}
	return nil, conflict("job %s/%s keeps changing; retry the request", c, j)
}

func (s *Service) patchOnce(ctx context.Context, c, j string, raw []byte) error {
	rec, err := s.store.GetJob(ctx, c, j)
	if err != nil {
		return storeError(err, c, j)
	}
	if rec.State == job.StateCompleted || rec.State == job.StateFaulted {
		return conflict("job %s/%s is %s, which is final: put a new definition or delete it", c, j, rec.State)
	}
	merged, stateOnly, err := s.mergeInto(rec, raw)
	if err != nil {
		return err
	}
	def, err := s.validator.Decode(merged)
	if err != nil {
		return invalid(err)
	}
	old, err := DecodeBlob(rec.Definition)
	if err != nil {
		return err
	}
	if !sameJSON(old.StartTime, def.Properties.StartTime) || !sameJSON(old.Recurrence, def.Properties.Recurrence) {
		_, err := s.store1(ctx, c, j, def.Properties, rec.Version, false)
		return err
	}
	return s.keepSchedule(ctx, rec, def.Properties, stateOnly)
}

// sameButState says a merged definition is the stored one but for its state (and the status,
// which is read-only and ignored): the patch only enabled or disabled the job, whether it held
// the state alone (schedctl, the dashboard, the Go SDK) or the whole definition as read,
// without its secrets (PowerShell). Such a change is stored in place, so it works while Redis
// is at its maxmemory (store.PutJob.InPlace).
func sameButState(stored, merged map[string]any) bool {
	without := func(m map[string]any) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			if !strings.EqualFold(k, "state") && !strings.EqualFold(k, "status") {
				out[k] = v
			}
		}
		return out
	}
	return reflect.DeepEqual(without(stored), without(merged))
}

// keepSchedule stores a change that leaves the schedule as accepted: only the state may move
// the next fire time (disabling drops it; enabling resumes after now, with no immediate run).
func (s *Service) keepSchedule(ctx context.Context, rec *store.Job, p job.Properties, inPlace bool) error {
	if err := certificates(&p); err != nil {
		return err
	}
	put := store.PutJob{Collection: rec.Collection, Name: rec.Name, Accepted: rec.Accepted, Next: rec.Next, At: s.now(),
		State: job.StateEnabled, IfVersion: rec.Version, IfNext: &rec.Next, InPlace: inPlace}
	switch {
	case p.State == job.StateDisabled:
		put.State, put.Next = job.StateDisabled, time.Time{}
	case rec.State == job.StateDisabled:
		sched, err := Compile(p, rec.Accepted)
		if err != nil {
			return err
		}
		if o := sched.Next(s.now(), rec.Fired); o.Done {
			put.State, put.Next = job.StateCompleted, time.Time{}
		} else {
			put.Next = o.Time
		}
	}
	var err error
	if put.Definition, err = s.encode(rec.Collection, rec.Name, p); err != nil {
		return err
	}
	_, err = s.putStored(ctx, put)
	return err
}

// mergeInto applies a patch (whole resource or bare properties) to a stored job. The patch is
// held to the size a definition may have before anything is decoded, so a huge patch costs a
// length check, not a merge.
// It also says whether the patch changed nothing but the state (sameButState).
func (s *Service) mergeInto(rec *store.Job, raw []byte) (merged []byte, stateOnly bool, err error) {
	if len(raw) > jobschema.MaxJobSize {
		return nil, false, badRequest("the patch is %d bytes; at most 16 KiB (16,384 bytes) are allowed", len(raw))
	}
	if err := jobschema.CheckText(raw); err != nil {
		return nil, false, invalid(err)
	}
	stored, err := s.decodeOpen(rec)
	if err != nil {
		return nil, false, err
	}
	b, err := json.Marshal(stored)
	if err != nil {
		return nil, false, err
	}
	var base, before map[string]any
	if err := json.Unmarshal(b, &base); err != nil {
		return nil, false, err
	}
	_ = json.Unmarshal(b, &before) // as base, which merge changes
	base["state"] = string(rec.State)
	var patch map[string]any
	if err := json.Unmarshal(raw, &patch); err != nil {
		return nil, false, badRequest("the patch is not a JSON object: %v", err)
	}
	for k, v := range patch {
		if strings.EqualFold(k, "properties") {
			inner, ok := v.(map[string]any)
			if !ok {
				return nil, false, badRequest("properties: must be an object")
			}
			patch = inner
			break
		}
	}
	after := merge(base, patch)
	merged, err = json.Marshal(after)
	return merged, err == nil && sameButState(before, after), err
}

// merge applies patch to base: objects merge key by key (names match case-insensitively),
// null deletes, anything else replaces. It is linear in the sizes of both: base's names are
// looked up through one index per object.
func merge(base, patch map[string]any) map[string]any {
	index := make(map[string]string, len(base))
	for k := range base {
		index[strings.ToLower(k)] = k
	}
	for pk, pv := range patch {
		bk, ok := index[strings.ToLower(pk)]
		if !ok {
			bk = pk
			index[strings.ToLower(pk)] = pk
		}
		switch pv := pv.(type) {
		case nil:
			delete(base, bk)
		case map[string]any:
			if bv, ok := base[bk].(map[string]any); ok {
				base[bk] = merge(bv, pv)
			} else {
				base[bk] = pv
			}
		default:
			base[bk] = pv
		}
	}
	return base
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
