package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// CollectionNamesAfter lists up to n collection names that sort after the name after ("" for
// the first), in order, and counts every collection. Each partition keeps its names in order
// (cnames) beside the set of them, and a page merges the partitions' next names: it reads about
// n names whatever the number of collections. Reading every name and sorting them took 29 ms a
// page of 1,000 among 50,000 collections, and a listing of them all grew with the square of
// their number. A partition whose index is out of step with its set (counts that differ, or a
// name the set no longer holds) has its index built again first.
func (s *Store) CollectionNamesAfter(ctx context.Context, after string, n int) (names []string, total int, err error) {
	sets, indexes, err := s.partitionCounts(ctx)
	if err != nil || n <= 0 {
		return nil, sum(sets), err
	}
	var stale []int
	for p := range sets {
		if sets[p] != indexes[p] {
			stale = append(stale, p)
		}
	}
	if len(stale) == 0 {
		if names, err = s.mergeNames(ctx, after, n); err == nil {
			stale, err = s.notInSets(ctx, names)
		}
		if err != nil || len(stale) == 0 {
			return names, sum(sets), err
		}
	}
	for _, p := range stale {
		if err := s.indexCollections(ctx, p); err != nil {
			names, err := s.namesFromSets(ctx, after, n) // Redis refuses the script: read every name
			return names, sum(sets), err
		}
	}
	names, err = s.mergeNames(ctx, after, n)
	return names, sum(sets), err
}

// CollectionCount counts every collection.
func (s *Store) CollectionCount(ctx context.Context) (int, error) {
	sets, _, err := s.partitionCounts(ctx)
	return sum(sets), err
}

// partitionCounts reads how many names each partition's set and index hold.
func (s *Store) partitionCounts(ctx context.Context) (sets, indexes []int64, err error) {
	pipe := s.rdb.Pipeline()
	cmds := make([][2]*redis.IntCmd, s.Partitions())
	for p := range cmds {
		cmds[p] = [2]*redis.IntCmd{pipe.SCard(ctx, s.k.colls(p)), pipe.ZCard(ctx, s.k.cnames(p))}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, fmt.Errorf("count collections: %w", err)
	}
	sets, indexes = make([]int64, len(cmds)), make([]int64, len(cmds))
	for p, c := range cmds {
		sets[p], indexes[p] = c[0].Val(), c[1].Val()
	}
	return sets, indexes, nil
}

func sum(counts []int64) int {
	n := 0
	for _, c := range counts {
		n += int(c)
	}
	return n
}

// mergeNames reads the partitions' indexes in rounds until the first n names after after are
// known: a partition that gave all it was asked for may hold more, so only the names up to the
// least last name of such partitions are sure.
func (s *Store) mergeNames(ctx context.Context, after string, n int) ([]string, error) {
	open := make([]int, s.Partitions())
	from := make([]string, s.Partitions())
	for p := range open {
		open[p], from[p] = p, "-"
		if after != "" {
			from[p] = "(" + after
		}
	}
	per := n/s.Partitions() + 8 // names asked of each partition a round: hashing spreads them evenly
	var names []string
	for {
		pipe := s.rdb.Pipeline()
		reads := make([]*redis.StringSliceCmd, len(open))
		for i, p := range open {
			reads[i] = pipe.ZRangeByLex(ctx, s.k.cnames(p), &redis.ZRangeBy{Min: from[p], Max: "+", Count: int64(per)})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("list collections: %w", err)
		}
		bound, more := "", open[:0]
		for i, p := range open {
			got := reads[i].Val()
			names = append(names, got...)
			if len(got) == per {
				last := got[len(got)-1]
				from[p], more = "("+last, append(more, p)
				if bound == "" || last < bound {
					bound = last
				}
			}
		}
		slices.Sort(names)
		open, per = more, per*2
		if len(open) == 0 {
			return names[:min(n, len(names))], nil
		}
		if i, _ := slices.BinarySearch(names, bound); i+1 >= n { // names[:i+1] are sure
			return names[:n], nil
		}
	}
}

// notInSets answers the partitions whose index holds a name of names that their set no longer
// holds: an earlier release's planner deleted it during a rolling upgrade and, creating as many,
// left the counts equal. A delete of this release removes both at once (one made between the
// listing's reads is in neither).
func (s *Store) notInSets(ctx context.Context, names []string) ([]int, error) {
	if len(names) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	inSet := make([]*redis.BoolCmd, len(names)) // SISMEMBER each rather than Redis 6.2's SMISMEMBER
	inIndex := make([]*redis.FloatCmd, len(names))
	for i, c := range names {
		p := s.k.partitionOf(c)
		inSet[i], inIndex[i] = pipe.SIsMember(ctx, s.k.colls(p), c), pipe.ZScore(ctx, s.k.cnames(p), c)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("list collections: %w", err)
	}
	var stale []int
	for i, c := range names {
		if p := s.k.partitionOf(c); !inSet[i].Val() && inIndex[i].Err() == nil && !slices.Contains(stale, p) {
			stale = append(stale, p)
		}
	}
	return stale, nil
}

// indexCollections builds a partition's index of names again from its set.
func (s *Store) indexCollections(ctx context.Context, p int) error {
	if err := s.run(ctx, "index_names", []string{s.k.colls(p), s.k.cnames(p)}).Err(); err != nil {
		return fmt.Errorf("index the collections of partition %d: %w", p, err)
	}
	return nil
}

// indexCollectionsOnce builds every partition's index at the first start of a release that
// keeps them (recorded in meta as cnames=1). A failure does not stop the start: the listings
// build a partition's index again when it disagrees with its set. (At Redis's maxmemory the
// build still runs: Redis lets a script whose first write is a delete write on.)
func (s *Store) indexCollectionsOnce(ctx context.Context) {
	if v, err := s.rdb.HGet(ctx, s.k.meta(), "cnames").Result(); err == nil && v == "1" {
		return
	}
	for p := range s.Partitions() {
		if s.indexCollections(ctx, p) != nil {
			return
		}
	}
	_ = s.rdb.HSet(ctx, s.k.meta(), "cnames", "1").Err()
}

// namesFromSets is CollectionNamesAfter from the sets of names, every one read.
func (s *Store) namesFromSets(ctx context.Context, after string, n int) ([]string, error) {
	names, err := s.CollectionNames(ctx)
	if err != nil {
		return nil, err
	}
	if after != "" {
		i, _ := slices.BinarySearch(names, after+"\x00") // the first name past after
		names = names[i:]
	}
	return names[:min(n, len(names))], nil
}
