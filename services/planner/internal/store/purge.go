package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Purge is a deleted job whose messages may still be on the due stream (an occurrence not yet
// delivered, a retry waiting for its interval, an error action): the delete records it
// (delete_job.lua) until its caller has removed them (EndPurge), so that a planner killed in
// between leaves it for another (Purges, TakePurge). Only the messages of the deleted job's
// incarnation are to go: a job put again under its name is another.
type Purge struct {
	Collection, Job string
	Incarnation     int64 // 0: a job stored before incarnations were kept
	// Since is the delete's time, or the time a planner took the purge up.
	Since time.Time
	since float64 // as stored, for TakePurge
}

func (p Purge) member() string {
	return member(p.Collection, p.Job) + "@" + strconv.FormatInt(p.Incarnation, 10)
}

// parsePurge reads a record of the purges set; ok is false for one not of its form.
func parsePurge(m string, score float64) (Purge, bool) {
	cj, inc, ok := strings.Cut(m, "@")
	c, j, ok2 := strings.Cut(cj, "/")
	n, err := strconv.ParseInt(inc, 10, 64)
	if !ok || !ok2 || err != nil {
		return Purge{}, false
	}
	return Purge{Collection: c, Job: j, Incarnation: n, Since: time.UnixMilli(int64(score)).UTC(), since: score}, true
}

// Purges lists the purges recorded before cutoff, oldest first in each partition, up to n a
// partition.
func (s *Store) Purges(ctx context.Context, cutoff time.Time, n int) ([]Purge, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, s.Partitions())
	for p := range s.Partitions() {
		cmds[p] = pipe.ZRangeByScoreWithScores(ctx, s.k.purges(p), &redis.ZRangeBy{Min: "-inf", Max: "(" + ms(cutoff), Count: int64(n)})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("list the deleted jobs' purges: %w", err)
	}
	var out []Purge
	for _, c := range cmds {
		for _, z := range c.Val() {
			m, _ := z.Member.(string)
			if p, ok := parsePurge(m, z.Score); ok {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// TakePurge takes up a purge at now, as listed by Purges: false when another planner took it
// first or it ended.
func (s *Store) TakePurge(ctx context.Context, p Purge, now time.Time) (Purge, bool, error) {
	key := s.k.purges(s.k.partitionOf(p.Collection))
	n, err := s.runReplicated(ctx, "take_purge", []string{key}, p.member(), strconv.FormatFloat(p.since, 'f', -1, 64), ms(now)).Int()
	if err != nil {
		return p, false, fmt.Errorf("take up the purge of job %s/%s: %w", p.Collection, p.Job, err)
	}
	p.Since, p.since = now.Truncate(time.Millisecond), float64(now.UnixMilli())
	return p, n == 1, nil
}

// EndPurge ends a purge's record once the job's messages are gone from the due stream.
func (s *Store) EndPurge(ctx context.Context, p Purge) error {
	key := s.k.purges(s.k.partitionOf(p.Collection))
	if err := s.rdb.ZRem(ctx, key, p.member()).Err(); err != nil {
		return fmt.Errorf("end the purge of job %s/%s: %w", p.Collection, p.Job, err)
	}
	return nil
}

// PurgeBacklog counts the deleted jobs whose messages are still to be removed from the due
// stream, and answers the oldest record's time (zero when there is none).
func (s *Store) PurgeBacklog(ctx context.Context) (int64, time.Time, error) {
	pipe := s.rdb.Pipeline()
	counts := make([]*redis.IntCmd, s.Partitions())
	firsts := make([]*redis.ZSliceCmd, s.Partitions())
	for p := range s.Partitions() {
		counts[p] = pipe.ZCard(ctx, s.k.purges(p))
		firsts[p] = pipe.ZRangeWithScores(ctx, s.k.purges(p), 0, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, time.Time{}, fmt.Errorf("count the deleted jobs' purges: %w", err)
	}
	var n int64
	var oldest time.Time
	for p := range counts {
		n += counts[p].Val()
		for _, z := range firsts[p].Val() {
			if at := time.UnixMilli(int64(z.Score)).UTC(); oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		}
	}
	return n, oldest, nil
}
