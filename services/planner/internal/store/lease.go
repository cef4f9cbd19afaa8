package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Outage is an interval in which no planner ran, and when it was recorded (zero for a record
// older than that field).
type Outage struct{ From, To, Recorded time.Time }

// Hold is what outages still settling hold back: the occurrences due by DueBy wait until at
// least Until, when the hold is looked at again (it lifts, or narrows to an outage recorded
// later). Zero: nothing is held.
type Hold struct{ DueBy, Until time.Time }

// Beat is what a heartbeat learns: how many planners are alive, the outages on record (newest
// first), and Redis's clock as the heartbeat ran.
type Beat struct {
	Live    int
	Outages []Outage
	Clock   time.Time
}

// Heartbeat tells Redis that planner id is alive until expiry, and records an outage of every
// planner, from two periods after the last heartbeat of any planner to this planner's process
// start, when that start came more than three periods after that heartbeat; a planner whose
// previous heartbeat (prev, zero for none) is more than three periods old lived through the
// gap, and removes the outages recorded over it (heartbeat.lua). An expiry already past leaves
// id out of the live planners (one that cannot dispatch), though it still counts as running
// for the outages.
func (s *Store) Heartbeat(ctx context.Context, id string, now, expiry, processStart, prev time.Time, period time.Duration, keep int) (Beat, error) {
	keys := []string{s.k.planners(), s.k.alive(), s.k.outages(), s.k.meta()}
	var prevMS int64
	if !prev.IsZero() {
		prevMS = prev.UnixMilli()
	}
	res, err := s.run(ctx, "heartbeat", keys, id, now.UnixMilli(), expiry.UnixMilli(), processStart.UnixMilli(),
		period.Milliseconds(), keep, prevMS, s.Partitions()).Slice()
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "REPARTITIONING "):
		return Beat{}, fmt.Errorf("heartbeat: %w: %s", ErrRepartitioning, strings.TrimPrefix(err.Error(), "REPARTITIONING "))
	case err != nil && strings.HasPrefix(err.Error(), "LAYOUT "):
		return Beat{}, fmt.Errorf("heartbeat: %w: %s", ErrLayout, strings.TrimPrefix(err.Error(), "LAYOUT "))
	case err != nil:
		return Beat{}, fmt.Errorf("heartbeat: %w", err)
	}
	if len(res) < 3 {
		return Beat{}, fmt.Errorf("heartbeat: %d values in the reply, want at least 3", len(res))
	}
	live, _ := res[0].(int64)
	sec, err1 := strconv.ParseInt(fmt.Sprint(res[1]), 10, 64)
	usec, err2 := strconv.ParseInt(fmt.Sprint(res[2]), 10, 64)
	if err1 != nil || err2 != nil {
		return Beat{}, fmt.Errorf("heartbeat: Redis's clock %v %v", res[1], res[2])
	}
	beat := Beat{Live: int(live), Clock: time.Unix(sec, usec*1000).UTC(), Outages: make([]Outage, 0, len(res)-3)}
	for _, v := range res[3:] {
		text, _ := v.(string)
		if o, ok := parseOutage(text); ok {
			beat.Outages = append(beat.Outages, o)
		}
	}
	return beat, nil
}

// Leave removes planner id from the live set at a clean stop, so the others rebalance at once.
func (s *Store) Leave(ctx context.Context, id string) error {
	if err := s.rdb.ZRem(ctx, s.k.planners(), id).Err(); err != nil {
		return fmt.Errorf("leave the planners: %w", err)
	}
	return nil
}

// FreePartitions reports which partitions have no lease holder now, of those it could read;
// err says why others could not be read (a Redis Cluster master lost, of those it serves).
func (s *Store) FreePartitions(ctx context.Context) (free []int, err error) {
	cmds := make([]*redis.IntCmd, s.Partitions())
	s.pipelined(ctx, len(cmds), false, func(p int) string { return s.k.owner(p) }, func(pipe redis.Pipeliner, p int) {
		cmds[p] = pipe.Exists(ctx, s.k.owner(p))
	})
	for p, c := range cmds {
		switch {
		case c.Err() != nil:
			err = fmt.Errorf("read partition leases: %w", c.Err())
		case c.Val() == 0:
			free = append(free, p)
		}
	}
	return free, err
}

// Acquire takes the leases of the given partitions that are still free, for ttl; it returns
// the partitions it took, and err when some could not be reached. The script is sent whole
// (EVAL), as Renew's.
func (s *Store) Acquire(ctx context.Context, partitions []int, token string, ttl time.Duration) (got []int, err error) {
	cmds := make([]*redis.Cmd, len(partitions))
	s.pipelined(ctx, len(cmds), false, func(i int) string { return s.k.owner(partitions[i]) }, func(pipe redis.Pipeliner, i int) {
		cmds[i] = s.scripts["acquire"].Eval(ctx, pipe, []string{s.k.owner(partitions[i])}, token, ttl.Milliseconds())
	})
	for i, c := range cmds {
		n, cerr := c.Int()
		switch {
		case cerr != nil:
			err = fmt.Errorf("acquire partition leases: %w", cerr)
		case n == 1:
			got = append(got, partitions[i])
		}
	}
	return got, err
}

// Renew extends the leases of the given partitions for ttl. It returns those renewed and those
// no longer held; a partition in neither could not be reached (a Redis Cluster master lost, of
// the partitions it serves), and err then says why.
// The script is sent whole (EVAL): a pipelined EVALSHA cannot fall back after a Redis restart.
func (s *Store) Renew(ctx context.Context, partitions []int, token string, ttl time.Duration) (renewed, lost []int, err error) {
	cmds := make([]*redis.Cmd, len(partitions))
	s.pipelined(ctx, len(cmds), false, func(i int) string { return s.k.owner(partitions[i]) }, func(pipe redis.Pipeliner, i int) {
		cmds[i] = s.scripts["renew"].Eval(ctx, pipe, []string{s.k.owner(partitions[i])}, token, ttl.Milliseconds())
	})
	for i, c := range cmds {
		n, cerr := c.Int()
		switch {
		case cerr != nil:
			err = cerr
		case n == 0:
			lost = append(lost, partitions[i])
		default:
			renewed = append(renewed, partitions[i])
		}
	}
	if err != nil {
		err = fmt.Errorf("renew partition leases: %w", err)
	}
	return renewed, lost, err
}

// Release gives up the lease of a partition, if it is still held with token.
func (s *Store) Release(ctx context.Context, p int, token string) error {
	if err := s.run(ctx, "release", []string{s.k.owner(p)}, token).Err(); err != nil {
		return fmt.Errorf("release partition %d: %w", p, err)
	}
	return nil
}
