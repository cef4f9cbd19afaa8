package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Repartitioned is what Repartition did.
type Repartitioned struct {
	From, To    int // the partition counts before and after
	Collections int // collections looked at
	Moved       int // collections moved to another partition
	Jobs        int // jobs of the moved collections
}

// ErrPlannersRunning: Repartition found a planner alive or a partition's lease held.
var ErrPlannersRunning = errors.New("planners are running")

// copyChunk is how many keys Repartition copies in one pipeline.
const copyChunk = 256

// Repartition moves the data Redis holds, written with the partition count it records, to
// the store's own count (WithPartitions), with every planner stopped: a collection and its
// jobs live in the partition their name hashes to, so a new count moves most of them. It
// records the move it is making first, and planners refuse to start until it has ended
// (CheckLayout). Each collection is copied to its new partition (DUMP and RESTORE, which work
// across the slots of a Redis Cluster), and only then removed from the old one, the list of
// the collection's jobs last, so that a Repartition stopped anywhere and run again finishes
// the move without losing or doubling anything. The partitions' version counters are all set
// to the highest of any, so that no version repeats within a partition. moved, when not nil,
// is called after each collection moved.
func (s *Store) Repartition(ctx context.Context, moved func(collection string)) (Repartitioned, error) {
	to := s.Partitions()
	r := Repartitioned{From: to, To: to}
	recorded, err := s.rdb.HGet(ctx, s.k.meta(), "partitions").Result()
	if errors.Is(err, redis.Nil) {
		return r, s.CheckLayout(ctx) // nothing written yet: the count is recorded as it is
	}
	if err != nil {
		return r, fmt.Errorf("repartition: %w", err)
	}
	if r.From, err = strconv.Atoi(recorded); err != nil || r.From < 1 {
		return r, fmt.Errorf("repartition: Redis records %q partitions", recorded)
	}
	if err := s.claimRepartition(ctx, r.From, to); err != nil {
		return r, err
	}
	if err := s.raiseCounters(ctx, r.From); err != nil {
		return r, err
	}
	old := newKeys(s.k.prefix, r.From)
	for p := range r.From {
		names, err := s.rdb.SMembers(ctx, old.colls(p)).Result()
		if err != nil {
			return r, fmt.Errorf("repartition: collections of partition %d: %w", p, err)
		}
		for _, c := range names {
			if old.partitionOf(c) != p {
				continue // moved here from another partition by an earlier run
			}
			r.Collections++
			if s.k.partitionOf(c) == p {
				continue // its keys are its keys at the new count too
			}
			jobs, err := s.moveCollection(ctx, old, c)
			if err != nil {
				return r, err
			}
			r.Moved++
			r.Jobs += jobs
			if moved != nil {
				moved(c)
			}
		}
		if err := s.moveGone(ctx, old, p); err != nil {
			return r, err
		}
		if err := s.movePurges(ctx, old, p); err != nil {
			return r, err
		}
	}
	return r, s.endRepartition(ctx, old)
}

// claimRepartition records the move from one count to another in meta, then checks that no
// planner runs: none has a live heartbeat and no partition's lease is held. In that order: a
// planner that checked the layout before the record is either seen here or, beating after it,
// refused its heartbeat (heartbeat.lua), and so takes no lease. A move refused here that had
// not been recorded before is unrecorded.
func (s *Store) claimRepartition(ctx context.Context, from, to int) error {
	v, err := s.rdb.HGet(ctx, s.k.meta(), "repartition").Result()
	switch {
	case err == nil && v != strconv.Itoa(to):
		return fmt.Errorf("%w: a repartition to %s partitions is under way: run it again with %s partitions to finish it", ErrLayout, v, v)
	case err != nil && !errors.Is(err, redis.Nil):
		return fmt.Errorf("repartition: %w", err)
	}
	resumed := err == nil
	if err := s.rdb.HSet(ctx, s.k.meta(), "repartition", to).Err(); err != nil {
		return fmt.Errorf("repartition: %w", err)
	}
	if err := s.noPlanner(ctx, from); err != nil {
		if !resumed {
			_ = s.rdb.HDel(ctx, s.k.meta(), "repartition").Err()
		}
		return err
	}
	return nil
}

// noPlanner checks that no planner has a live heartbeat and no partition's lease (at the old
// count, from) is held.
func (s *Store) noPlanner(ctx context.Context, from int) error {
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("repartition: %w", err)
	}
	alive, err := s.rdb.ZRangeByScore(ctx, s.k.planners(), &redis.ZRangeBy{Min: strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return fmt.Errorf("repartition: %w", err)
	}
	if len(alive) > 0 {
		return fmt.Errorf("%w: %s; stop every planner first", ErrPlannersRunning, strings.Join(alive, ", "))
	}
	old := newKeys(s.k.prefix, from)
	for p := range from {
		if n, err := s.rdb.Exists(ctx, old.owner(p)).Result(); err != nil || n > 0 {
			return fmt.Errorf("%w: the lease of partition %d is held (%v); stop every planner first, or wait for the lease to run out", ErrPlannersRunning, p, err)
		}
	}
	return nil
}

// raiseCounters sets every partition's version counter, old and new, to the highest of any.
func (s *Store) raiseCounters(ctx context.Context, from int) error {
	old := newKeys(s.k.prefix, from)
	var counters []string
	for p := range max(from, s.Partitions()) {
		if p < from {
			counters = append(counters, old.seq(p))
		} else {
			counters = append(counters, s.k.seq(p))
		}
	}
	var top int64
	for _, key := range counters {
		n, err := s.rdb.Get(ctx, key).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("repartition: %s: %w", key, err)
		}
		top = max(top, n)
	}
	for p := range s.Partitions() {
		if err := s.rdb.Set(ctx, s.k.seq(p), top, 0).Err(); err != nil {
			return fmt.Errorf("repartition: %w", err)
		}
	}
	return nil
}

// moveCollection copies collection c from its partition at the old count to its partition at
// the store's, then removes it from the old one; it returns how many jobs it has.
func (s *Store) moveCollection(ctx context.Context, old keys, c string) (int, error) {
	jobs, err := s.rdb.ZRange(ctx, old.jobs(c), 0, -1).Result()
	if err != nil {
		return 0, fmt.Errorf("repartition %s: %w", c, err)
	}
	var from, to []string // the job keys, then the collection's own last
	for _, j := range jobs {
		from = append(from, old.def(c, j), old.state(c, j), old.history(c, j), old.results(c, j))
		to = append(to, s.k.def(c, j), s.k.state(c, j), s.k.history(c, j), s.k.results(c, j))
	}
	from = append(from, old.coll(c), old.jobs(c))
	to = append(to, s.k.coll(c), s.k.jobs(c))
	for i := 0; i < len(from); i += copyChunk {
		end := min(i+copyChunk, len(from))
		if err := s.copyKeys(ctx, from[i:end], to[i:end]); err != nil {
			return 0, fmt.Errorf("repartition %s: %w", c, err)
		}
	}
	oldP, newP := old.partitionOf(c), s.k.partitionOf(c)
	if err := s.moveDue(ctx, old.due(oldP), s.k.due(newP), c, jobs); err != nil {
		return 0, fmt.Errorf("repartition %s: %w", c, err)
	}
	if err := s.rdb.SAdd(ctx, s.k.colls(newP), c).Err(); err != nil {
		return 0, fmt.Errorf("repartition %s: %w", c, err)
	}
	if err := s.rdb.ZAdd(ctx, s.k.cnames(newP), redis.Z{Member: c}).Err(); err != nil {
		return 0, fmt.Errorf("repartition %s: %w", c, err)
	}
	if err := s.moveUnfinished(ctx, old.unfinished(oldP), s.k.unfinished(newP), c); err != nil {
		return 0, fmt.Errorf("repartition %s: %w", c, err)
	}
	// Removed in the order that lets a run stopped half way find the rest: the job keys, then
	// the collection's hash and job list, then its name in the partition.
	for keys := range slices.Chunk(from, copyChunk) { // one slot: every key of c carries its tag
		if err := s.rdb.Del(ctx, keys...).Err(); err != nil {
			return 0, fmt.Errorf("repartition %s: %w", c, err)
		}
	}
	if err := s.rdb.SRem(ctx, old.colls(oldP), c).Err(); err != nil {
		return 0, fmt.Errorf("repartition %s: %w", c, err)
	}
	if err := s.rdb.ZRem(ctx, old.cnames(oldP), c).Err(); err != nil {
		return 0, fmt.Errorf("repartition %s: %w", c, err)
	}
	return len(jobs), nil
}

// moveUnfinished moves c's unfinished change, if any, at its time: the first planner to start
// after the move finishes it.
func (s *Store) moveUnfinished(ctx context.Context, from, to, c string) error {
	at, err := s.rdb.ZScore(ctx, from, c).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.rdb.ZAdd(ctx, to, redis.Z{Score: at, Member: c}).Err(); err != nil {
		return err
	}
	return s.rdb.ZRem(ctx, from, c).Err()
}

// copyKeys copies each key of from to the key of to at the same place (DUMP, then RESTORE
// REPLACE); a key that does not exist (removed by an earlier run that stopped) is left alone.
func (s *Store) copyKeys(ctx context.Context, from, to []string) error {
	pipe := s.rdb.Pipeline()
	dumps := make([]*redis.StringCmd, len(from))
	for i, key := range from {
		dumps[i] = pipe.Dump(ctx, key)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	pipe = s.rdb.Pipeline()
	for i, d := range dumps {
		if d.Err() == nil {
			pipe.RestoreReplace(ctx, to[i], 0, d.Val())
		}
	}
	if pipe.Len() == 0 {
		return nil
	}
	_, err := pipe.Exec(ctx)
	return err
}

// moveDue puts the jobs of c in the new due set at the times the old one has them, then takes
// them out of the old one.
func (s *Store) moveDue(ctx context.Context, from, to, c string, jobs []string) error {
	for chunk := range slices.Chunk(jobs, copyChunk) {
		members := make([]string, len(chunk))
		for k, j := range chunk {
			members[k] = member(c, j)
		}
		pipe := s.rdb.Pipeline()
		scores := make([]*redis.FloatCmd, len(members))
		for k, m := range members {
			scores[k] = pipe.ZScore(ctx, from, m)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		var zs []redis.Z
		var olds []any
		for k, sc := range scores {
			if sc.Err() == nil { // a job not due (done, disabled) has no place
				zs = append(zs, redis.Z{Score: sc.Val(), Member: members[k]})
				olds = append(olds, members[k])
			}
		}
		if len(zs) == 0 {
			continue
		}
		if err := s.rdb.ZAdd(ctx, to, zs...).Err(); err != nil {
			return err
		}
		if err := s.rdb.ZRem(ctx, from, olds...).Err(); err != nil {
			return err
		}
	}
	return nil
}

// moveGone moves the deletes partition p remembers (gone and its times) of the collections
// that hash elsewhere at the new count.
func (s *Store) moveGone(ctx context.Context, old keys, p int) error {
	gone, err := s.rdb.HGetAll(ctx, old.gone(p)).Result()
	if err != nil {
		return fmt.Errorf("repartition the deletes of partition %d: %w", p, err)
	}
	for m, stamp := range gone {
		c, _, _ := strings.Cut(m, "/")
		if old.partitionOf(c) != p || s.k.partitionOf(c) == p {
			continue
		}
		q := s.k.partitionOf(c)
		at, err := s.rdb.ZScore(ctx, old.goneTimes(p), m).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("repartition the delete of %s: %w", m, err)
		}
		// The stamp and its time first, then their removal: a run stopped between does both again.
		if err := s.rdb.HSet(ctx, s.k.gone(q), m, stamp).Err(); err != nil {
			return fmt.Errorf("repartition the delete of %s: %w", m, err)
		}
		if err := s.rdb.ZAdd(ctx, s.k.goneTimes(q), redis.Z{Score: at, Member: m}).Err(); err != nil {
			return fmt.Errorf("repartition the delete of %s: %w", m, err)
		}
		if err := s.rdb.HDel(ctx, old.gone(p), m).Err(); err != nil {
			return fmt.Errorf("repartition the delete of %s: %w", m, err)
		}
		if err := s.rdb.ZRem(ctx, old.goneTimes(p), m).Err(); err != nil {
			return fmt.Errorf("repartition the delete of %s: %w", m, err)
		}
	}
	return nil
}

// movePurges moves the deleted jobs' purges partition p records of the collections that hash
// elsewhere at the new count, at their time: the first planner to start after the move purges
// them.
func (s *Store) movePurges(ctx context.Context, old keys, p int) error {
	purges, err := s.rdb.ZRangeWithScores(ctx, old.purges(p), 0, -1).Result()
	if err != nil {
		return fmt.Errorf("repartition the purges of partition %d: %w", p, err)
	}
	for _, z := range purges {
		m, _ := z.Member.(string)
		c, _, _ := strings.Cut(m, "/")
		if old.partitionOf(c) != p || s.k.partitionOf(c) == p {
			continue
		}
		// Added, then removed: a run stopped between does both again.
		if err := s.rdb.ZAdd(ctx, s.k.purges(s.k.partitionOf(c)), z).Err(); err != nil {
			return fmt.Errorf("repartition the purge of %s: %w", m, err)
		}
		if err := s.rdb.ZRem(ctx, old.purges(p), m).Err(); err != nil {
			return fmt.Errorf("repartition the purge of %s: %w", m, err)
		}
	}
	return nil
}

// endRepartition removes the partitions the new count no longer has (empty by now), then
// records the new count and that the move has ended.
func (s *Store) endRepartition(ctx context.Context, old keys) error {
	for p := s.Partitions(); p < len(old.tags); p++ {
		for _, key := range []string{old.due(p), old.colls(p), old.cnames(p), old.seq(p), old.gone(p), old.goneTimes(p), old.owner(p), old.unfinished(p), old.purges(p)} {
			if err := s.rdb.Del(ctx, key).Err(); err != nil {
				return fmt.Errorf("repartition: remove %s: %w", key, err)
			}
		}
	}
	if err := s.rdb.HSet(ctx, s.k.meta(), "partitions", s.Partitions()).Err(); err != nil {
		return fmt.Errorf("repartition: %w", err)
	}
	if err := s.rdb.HDel(ctx, s.k.meta(), "repartition").Err(); err != nil {
		return fmt.Errorf("repartition: %w", err)
	}
	return nil
}
