package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// ErrLayout says the data in Redis was written with another layout than the store's: a
// configuration mistake that no retry mends.
var ErrLayout = errors.New("data layout mismatch")

// ErrRepartitioning: the data is being moved to another partition count (Repartition); a
// planner takes no lease until the move has ended.
var ErrRepartitioning = errors.New("data moving to another partition count")

// CheckLayout records the partition count in Redis at the first start, and refuses a count
// that differs from the recorded one: a collection's partition is a hash of its name modulo the
// count, so another count would not find the data. Data written before the count was recorded
// used DefaultPartitions. It then brings data of earlier versions to this one's layout.
func (s *Store) CheckLayout(ctx context.Context) error {
	if err := s.checkPartitions(ctx); err != nil {
		return err
	}
	s.indexCollectionsOnce(ctx)
	return s.indexJobs(ctx)
}

// indexJobs turns the job sets of earlier versions into sorted sets, once (recorded in meta as
// index=zset): listing pages by name, at the same cost at any depth.
func (s *Store) indexJobs(ctx context.Context) error {
	if v, err := s.rdb.HGet(ctx, s.k.meta(), "index").Result(); err == nil && v == "zset" {
		return nil
	}
	names, err := s.CollectionNames(ctx)
	if err != nil {
		return err
	}
	for _, c := range names {
		if err := s.run(ctx, "index_names", []string{s.k.jobs(c), s.k.jobs(c)}).Err(); err != nil {
			return fmt.Errorf("index the jobs of %s: %w", c, err)
		}
	}
	if err := s.rdb.HSet(ctx, s.k.meta(), "index", "zset").Err(); err != nil {
		return fmt.Errorf("check the data layout: %w", err)
	}
	return nil
}

func (s *Store) checkPartitions(ctx context.Context) error {
	n := s.Partitions()
	if v, err := s.rdb.HGet(ctx, s.k.meta(), "repartition").Result(); err == nil {
		return fmt.Errorf("%w: the data is being moved to %s partitions (planner -repartition); run it again with %s partitions to finish the move", ErrLayout, v, v)
	}
	// Read first: a planner that starts while Redis is at its maxmemory must not need a write
	// (HSETNX is refused then, even for a field that exists), or it would never start.
	v, err := s.rdb.HGet(ctx, s.k.meta(), "partitions").Result()
	switch {
	case err == nil:
		return s.samePartitions(v)
	case !errors.Is(err, redis.Nil):
		return fmt.Errorf("check the data layout: %w", err)
	}
	set, err := s.rdb.HSetNX(ctx, s.k.meta(), "partitions", n).Result()
	if err != nil {
		return fmt.Errorf("check the data layout: %w", err)
	}
	if set {
		if n != DefaultPartitions {
			old := newKeys(s.k.prefix, DefaultPartitions)
			for p := range DefaultPartitions {
				if c, err := s.rdb.Exists(ctx, old.colls(p)).Result(); err == nil && c > 0 {
					_ = s.rdb.HDel(ctx, s.k.meta(), "partitions").Err()
					return fmt.Errorf("%w: Redis holds collections written with %d partitions (key prefix %q); this planner is set to %d partitions, which would not find them",
						ErrLayout, DefaultPartitions, s.k.prefix, n)
				}
			}
		}
		return nil
	}
	if v, err = s.rdb.HGet(ctx, s.k.meta(), "partitions").Result(); err != nil {
		return fmt.Errorf("check the data layout: %w", err)
	}
	return s.samePartitions(v)
}

// samePartitions checks the partition count recorded in Redis (v) against this planner's.
func (s *Store) samePartitions(v string) error {
	n := s.Partitions()
	if recorded, _ := strconv.Atoi(v); recorded != n {
		return fmt.Errorf("%w: Redis holds data written with %s partitions (key prefix %q); this planner is set to %d: set the partitions to %s, or move the data to %d with every planner stopped (planner -repartition, docs/scaling.md)",
			ErrLayout, v, s.k.prefix, n, v, n)
	}
	return nil
}
