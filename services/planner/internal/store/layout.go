package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// ErrLayout says the data in Redis was written with another layout than the store's: a
// configuration mistake that no retry mends.
var ErrLayout = errors.New("data layout mismatch")

// CheckLayout records the partition count in Redis at the first start, and refuses a count
// that differs from the recorded one: a collection's partition is a hash of its name modulo the
// count, so another count would not find the data. Data written before the count was recorded
// used DefaultPartitions.
func (s *Store) CheckLayout(ctx context.Context) error {
	n := s.Partitions()
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
	v, err := s.rdb.HGet(ctx, s.k.meta(), "partitions").Result()
	if err != nil {
		return fmt.Errorf("check the data layout: %w", err)
	}
	if recorded, _ := strconv.Atoi(v); recorded != n {
		return fmt.Errorf("%w: Redis holds data written with %s partitions (key prefix %q); this planner is set to %d: set the partitions to %s",
			ErrLayout, v, s.k.prefix, n, v)
	}
	return nil
}
