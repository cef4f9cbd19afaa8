package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/shared/job"
)

// Collection is the stored record of a job collection.
type Collection struct {
	Name        string
	Definition  []byte // the collection resource JSON
	State       job.CollectionState
	MaxJobCount int
	JobCount    int
	// Generation changes with every write of the collection and never repeats; "" for one
	// written before generations were kept. PutJob.CollectionGeneration names it.
	Generation string
}

// PutCollection stores a collection; it reports whether it was created. With createOnly an
// existing collection is left alone and ErrExists returned.
func (s *Store) PutCollection(ctx context.Context, name string, def []byte, state job.CollectionState, maxJobCount int, createOnly bool) (bool, error) {
	part := s.k.partitionOf(name)
	keys := []string{s.k.colls(part), s.k.coll(name), s.k.seq(part), s.k.cnames(part), s.k.unfinished(part)}
	n, err := s.runReplicated(ctx, "put_collection", keys, name, def, string(state), maxJobCount, boolArg(createOnly)).Int()
	if err != nil {
		return false, fmt.Errorf("put collection %s: %w", name, scriptError(err))
	}
	return n == 1, nil
}

// GetCollection reads a collection, or ErrNotFound.
func (s *Store) GetCollection(ctx context.Context, name string) (*Collection, error) {
	pipe := s.rdb.Pipeline()
	h := pipe.HGetAll(ctx, s.k.coll(name))
	n := pipe.ZCard(ctx, s.k.jobs(name))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("get collection %s: %w", name, err)
	}
	v := h.Val()
	if len(v) == 0 {
		return nil, fmt.Errorf("collection %s: %w", name, ErrNotFound)
	}
	return collectionOf(name, v, n.Val()), nil
}

// GetCollections reads the named collections in one pipelined round trip, in the order named;
// those not found (deleted since their names were read) are left out.
func (s *Store) GetCollections(ctx context.Context, names []string) ([]*Collection, error) {
	pipe := s.rdb.Pipeline()
	defs := make([]*redis.MapStringStringCmd, len(names))
	counts := make([]*redis.IntCmd, len(names))
	for i, name := range names {
		defs[i] = pipe.HGetAll(ctx, s.k.coll(name))
		counts[i] = pipe.ZCard(ctx, s.k.jobs(name))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("get collections: %w", err)
	}
	out := make([]*Collection, 0, len(names))
	for i, name := range names {
		if v := defs[i].Val(); len(v) > 0 {
			out = append(out, collectionOf(name, v, counts[i].Val()))
		}
	}
	return out, nil
}

// collectionOf is a collection from its stored hash and its number of jobs.
func collectionOf(name string, v map[string]string, jobs int64) *Collection {
	return &Collection{Name: name, Definition: []byte(v["def"]), State: job.CollectionState(v["state"]),
		MaxJobCount: atoi(v["maxJobCount"]), JobCount: int(jobs), Generation: v["gen"]}
}

// CollectionNames lists every collection, sorted.
func (s *Store) CollectionNames(ctx context.Context) ([]string, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, s.Partitions())
	for p := range s.Partitions() {
		cmds[p] = pipe.SMembers(ctx, s.k.colls(p))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("list collections: %w", err)
	}
	var names []string
	for _, c := range cmds {
		names = append(names, c.Val()...)
	}
	slices.Sort(names)
	return names, nil
}

// deleteChunk bounds the jobs one call of a collection's deletion deletes: about 11 µs of
// Redis a job, so about 11 ms a call. One call for every job held Redis, and every planner's
// dispatch with it, for 3.4 s for a collection of 300,000 jobs.
const deleteChunk = 1000

// DeleteCollection deletes a collection and its jobs; it reports whether it existed. A large
// collection's jobs go deleteChunk at a time first, each call its own (other clients' calls run
// between them); the last ones go with the collection, in one call that holds a put made
// meanwhile to account. The delete is recorded as under way since at (Changes) from its first
// call until EndDelete.
func (s *Store) DeleteCollection(ctx context.Context, name string, at time.Time) (bool, error) {
	if err := s.deleteJobsOf(ctx, name, at); err != nil {
		return false, err
	}
	for range 5 { // a job put between listing and deleting makes the script refuse: list again
		jobs, err := s.JobNames(ctx, name)
		if err != nil {
			return false, err
		}
		part := s.k.partitionOf(name)
		keys := []string{s.k.colls(part), s.k.coll(name), s.k.jobs(name), s.k.due(part), s.k.cnames(part), s.k.unfinished(part)}
		args := []any{name, ms(at)}
		for _, j := range jobs {
			keys = append(keys, s.k.def(name, j), s.k.state(name, j), s.k.history(name, j), s.k.results(name, j))
			args = append(args, j)
		}
		n, err := s.runReplicated(ctx, "delete_collection", keys, args...).Int()
		if errors.Is(scriptError(err), ErrConflict) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("delete collection %s: %w", name, err)
		}
		return n == 1, nil
	}
	return false, fmt.Errorf("delete collection %s: %w", name, ErrConflict)
}

// EndDelete ends the record of a collection's delete (DeleteCollection) once the caller has
// removed its messages from the due stream.
func (s *Store) EndDelete(ctx context.Context, name string) error {
	keys := []string{s.k.unfinished(s.k.partitionOf(name)), s.k.coll(name)}
	if err := s.runReplicated(ctx, "end_delete", keys, name).Err(); err != nil {
		return fmt.Errorf("end the delete of collection %s: %w", name, err)
	}
	return nil
}

// EndChange ends the record of a collection's pause to state (Disabled, Suspended) once its
// jobs' messages are gone from the due stream; a change that overtook it keeps its own.
func (s *Store) EndChange(ctx context.Context, name string, state job.CollectionState) error {
	keys := []string{s.k.coll(name), s.k.unfinished(s.k.partitionOf(name))}
	if err := s.runReplicated(ctx, "end_change", keys, name, string(state)).Err(); err != nil {
		return fmt.Errorf("end the change of collection %s to %s: %w", name, state, err)
	}
	return nil
}

// deleteJobsOf deletes a collection's jobs deleteChunk at a time while it has more than that,
// recording the delete as unfinished (at: now) until the collection itself goes.
func (s *Store) deleteJobsOf(ctx context.Context, name string, at time.Time) error {
	part := s.k.partitionOf(name)
	for {
		jobs, err := s.JobNamesAfter(ctx, name, "", deleteChunk+1)
		if err != nil || len(jobs) <= deleteChunk {
			return err
		}
		jobs = jobs[:deleteChunk]
		keys := []string{s.k.jobs(name), s.k.due(part), s.k.coll(name), s.k.unfinished(part)}
		args := []any{name, ms(at)}
		for _, j := range jobs {
			keys = append(keys, s.k.def(name, j), s.k.state(name, j), s.k.history(name, j), s.k.results(name, j))
			args = append(args, j)
		}
		if err := s.runReplicated(ctx, "delete_jobs", keys, args...).Err(); err != nil {
			return fmt.Errorf("delete collection %s: %w", name, scriptError(err))
		}
	}
}

// Reschedule is a job to put back in the due set when its collection is enabled.
type Reschedule struct {
	Name    string
	Next    time.Time // zero: the series ran out while the collection was disabled (Completed)
	Version int64
}

// stateChunk bounds the jobs one call of a collection's state change goes through: a call
// for every job held Redis for 1.2 s (disable) and 3.1 s (enable) with 300,000 jobs.
const stateChunk = 1000

// StateChange is one call of a collection's state change, which goes through its jobs
// stateChunk at a time: the first call sets the state, the later ones go on from After while
// it holds.
type StateChange struct {
	State job.CollectionState
	Then  bool   // a later call
	After string // the last job gone through, as the previous call answered (StateStep.Last)
	// Schedule are jobs of the previous call to put back in the due set (enabling): the caller
	// computed their next times.
	Schedule []Reschedule
	// At is now: until the change is done, it is recorded as under way since its last call
	// (Changes).
	At time.Time
}

// StateStep is what a call of a state change answers.
type StateStep struct {
	Last        string   // the last job gone through
	Done        bool     // no job after Last
	Unscheduled []string // enabling: the call's jobs not in the due set, to compute and schedule
	// Overtaken: the collection's state changed, or it was deleted, since the first call; the
	// change that did so carries on.
	Overtaken bool
}

// SetCollectionState makes one call of a collection's state change (StateChange). Disabling
// takes the jobs gone through out of the due set; enabling answers those not in it.
func (s *Store) SetCollectionState(ctx context.Context, name string, ch StateChange) (StateStep, error) {
	part := s.k.partitionOf(name)
	keys := []string{s.k.coll(name), s.k.jobs(name), s.k.due(part), s.k.unfinished(part)}
	first := "1"
	if ch.Then {
		first = ""
	}
	args := []any{string(ch.State), name, first, ch.After, stateChunk, ms(ch.At)}
	for _, r := range ch.Schedule {
		keys = append(keys, s.k.state(name, r.Name))
		args = append(args, member(name, r.Name), ms(r.Next), r.Version)
	}
	res, err := s.runReplicated(ctx, "set_collection_state", keys, args...).StringSlice()
	err = scriptError(err)
	if err == nil && len(res) < 2 {
		err = fmt.Errorf("%d values answered", len(res))
	}
	if err != nil {
		return StateStep{}, fmt.Errorf("set state of collection %s: %w", name, err)
	}
	return StateStep{Last: res[1], Done: res[0] == "done", Overtaken: res[0] == "overtaken", Unscheduled: res[2:]}, nil
}
