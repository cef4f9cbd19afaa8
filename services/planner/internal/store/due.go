package store

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/resched/resched/shared/job"
)

// Claim takes up to batch members of a partition that are due by dueBy, earliest first,
// leasing them until leaseUntil: other planners skip them until then, and take them over if
// this one dies.
func (s *Store) Claim(ctx context.Context, partition int, dueBy, leaseUntil time.Time, batch int) ([]string, error) {
	members, err := s.run(ctx, "claim", []string{s.k.due(partition)}, dueBy.UnixMilli(), leaseUntil.UnixMilli(), batch).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("claim due jobs of partition %d: %w", partition, err)
	}
	return members, nil
}

// Advance is the move of one claimed job to its next fire time.
type Advance struct {
	Collection, Name string
	Claimed          time.Time // the job's Next when it was claimed
	Next             time.Time // zero: the series is over
	Fired            int
	Occurrence       int
	Published        time.Time // the occurrence published now; zero when it was skipped
}

// Ended is a job that reached its final state.
type Ended struct {
	Collection, Name string
	State            job.State
}

// Advance moves claimed jobs of one partition on, in one script. Jobs changed since their
// claim are left alone. It returns the jobs that ended (Completed or Faulted).
func (s *Store) Advance(ctx context.Context, partition int, moves []Advance) ([]Ended, error) {
	if len(moves) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, 1+2*len(moves))
	args := make([]any, 0, 6*len(moves))
	keys = append(keys, s.k.due(partition))
	for _, a := range moves {
		keys = append(keys, s.k.state(a.Collection, a.Name), s.k.coll(a.Collection))
		args = append(args, member(a.Collection, a.Name), ms(a.Claimed), ms(a.Next), a.Fired, a.Occurrence, ms(a.Published))
	}
	res, err := s.run(ctx, "advance", keys, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("advance %d jobs of partition %d: %w", len(moves), partition, err)
	}
	var ended []Ended
	for i := 0; i+1 < len(res); i += 2 {
		c, j := splitMember(res[i])
		ended = append(ended, Ended{Collection: c, Name: j, State: job.State(res[i+1])})
	}
	return ended, nil
}

// DueBacklog counts the jobs due at now that no planner has claimed yet, over all partitions.
func (s *Store) DueBacklog(ctx context.Context, now time.Time) (int64, error) {
	pipe := s.rdb.Pipeline()
	max := fmt.Sprint(now.UnixMilli())
	for p := range Partitions {
		pipe.ZCount(ctx, s.k.due(p), "-inf", max)
	}
	cmds, err := pipe.Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("count due jobs: %w", err)
	}
	var n int64
	for _, c := range cmds {
		n += c.(interface{ Val() int64 }).Val()
	}
	return n, nil
}

// Earliest returns the earliest score in the due sets of the given partitions: the next fire
// time or lease end that a dispatcher should wake for.
func (s *Store) Earliest(ctx context.Context, partitions []int) (time.Time, bool, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, len(partitions))
	for i, p := range partitions {
		cmds[i] = pipe.ZRangeWithScores(ctx, s.k.due(p), 0, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return time.Time{}, false, fmt.Errorf("peek due jobs: %w", err)
	}
	var best float64
	found := false
	for _, c := range cmds {
		for _, z := range c.Val() {
			if !found || z.Score < best {
				best, found = z.Score, true
			}
		}
	}
	return time.UnixMilli(int64(best)).UTC(), found, nil
}
