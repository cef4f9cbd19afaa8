package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Change is a collection's state change or delete under way, as its calls record it (the
// scripts set_collection_state.lua, delete_jobs.lua and delete_collection.lua), for a planner
// to take up when the one that made them stopped before the end. A delete ends when the
// collection's messages are gone from the due stream too (EndDelete).
type Change struct {
	Collection string
	// Kind is the state the change sets (Enabled, Disabled, Suspended), or ChangeDelete.
	Kind string
	// From is where a call takes it up again (StateChange.After).
	From string
	// Last is the time of its last call, as recorded.
	Last time.Time
	last float64 // as stored, for TakeChange
}

// ChangeDelete is the Kind of a collection's delete.
const ChangeDelete = "delete"

// Changes lists the changes under way whose last call was before cutoff (every one when
// cutoff is zero), oldest first in each partition, up to n a partition.
func (s *Store) Changes(ctx context.Context, cutoff time.Time, n int) ([]Change, error) {
	upTo := "+inf"
	if !cutoff.IsZero() {
		upTo = "(" + ms(cutoff)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, s.Partitions())
	for p := range s.Partitions() {
		cmds[p] = pipe.ZRangeByScoreWithScores(ctx, s.k.unfinished(p), &redis.ZRangeBy{Min: "-inf", Max: upTo, Count: int64(n)})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("list collection changes: %w", err)
	}
	var out []Change
	for _, c := range cmds {
		for _, z := range c.Val() {
			name, _ := z.Member.(string)
			out = append(out, Change{Collection: name, Last: time.UnixMilli(int64(z.Score)).UTC(), last: z.Score})
		}
	}
	if len(out) == 0 {
		return out, nil
	}
	// What each sets, as recorded when read (TakeChange reads it again, with the time).
	pipe = s.rdb.Pipeline()
	kinds := make([]*redis.SliceCmd, len(out))
	for i, ch := range out {
		kinds[i] = pipe.HMGet(ctx, s.k.coll(ch.Collection), "change", "changeFrom", "state")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("list collection changes: %w", err)
	}
	for i, k := range kinds {
		v := k.Val()
		if len(v) != 3 {
			continue
		}
		if v[2] == nil { // every collection has a state: deleted, its messages maybe still on the due stream
			out[i].Kind = ChangeDelete
			continue
		}
		out[i].Kind, _ = v[0].(string) // "" when the collection records none (an earlier release's)
		out[i].From, _ = v[1].(string)
	}
	return out, nil
}

// TakeChange takes up a stale change at now: it answers the change with its Kind and From as
// they are now, and false when another planner took it first, its caller went on meanwhile,
// or it ended.
func (s *Store) TakeChange(ctx context.Context, ch Change, now time.Time) (Change, bool, error) {
	part := s.k.partitionOf(ch.Collection)
	res, err := s.runReplicated(ctx, "take_change", []string{s.k.unfinished(part), s.k.coll(ch.Collection)},
		ch.Collection, strconv.FormatFloat(ch.last, 'f', -1, 64), ms(now)).StringSlice()
	if errors.Is(err, redis.Nil) {
		return ch, false, nil
	}
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("%d values answered", len(res))
	}
	if err != nil {
		return ch, false, fmt.Errorf("take up the change of collection %s: %w", ch.Collection, err)
	}
	ch.Kind, ch.From, ch.Last, ch.last = res[0], res[1], now, float64(now.UnixMilli())
	return ch, true, nil
}
